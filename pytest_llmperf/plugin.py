"""pytest entry point (filled in by the gate work)."""
