"""autosched.search."""
