"""autosched.space."""
