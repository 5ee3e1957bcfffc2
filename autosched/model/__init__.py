"""autosched.model."""
