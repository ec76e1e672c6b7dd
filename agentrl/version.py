"""The package's version: one place, read by packaging and written into outputs."""

__version__ = "0.1.0"
