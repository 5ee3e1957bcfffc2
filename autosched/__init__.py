"""autosched: an autotuning SDK for tensor programs."""
