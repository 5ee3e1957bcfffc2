"""autosched.ops."""
