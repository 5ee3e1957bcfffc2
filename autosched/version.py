"""The version of autosched, in one module that imports nothing (setup.cfg and the log read it)."""

__version__ = "0.1.0"
