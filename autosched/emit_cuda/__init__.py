"""autosched.emit_cuda."""
