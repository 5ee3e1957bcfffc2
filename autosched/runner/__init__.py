"""autosched.runner."""
