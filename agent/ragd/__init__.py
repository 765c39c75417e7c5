"""ragd: a resident agent that keeps folders of documents searchable, offline, with no database server."""

__version__ = "0.1.0"
