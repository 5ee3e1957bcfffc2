"""autosched.emit_c."""
