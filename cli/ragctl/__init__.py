"""ragctl: the thin command line of the ragd agent (standard library only)."""

__version__ = "0.1.0"
