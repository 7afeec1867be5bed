"""Sources and sinks: where records come from and where decisions go."""
