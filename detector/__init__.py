"""neardup: streaming near-duplicate detection with SimHash and Manku's block tables."""

__version__ = "0.1.0"
