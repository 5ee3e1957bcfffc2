"""autosched.lower."""
