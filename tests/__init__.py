"""The unit suite of neardup (no network, no servers)."""
