"""autosched.emit_opencl."""
