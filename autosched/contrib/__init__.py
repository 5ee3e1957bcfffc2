"""Counterparts of TVM's ``tvm.contrib`` wrappers (``from autosched.contrib import cblas``)."""
