"""Exporters: tuned programs written out as standalone sources for builds without autosched.

The modules import one way, each only from those listed before it:

    makefile      text for Makefiles: plain words, safe comments, compiler and flag settings
    user_code     the Makefile lines that link what a kernel's user C (extern calls) needs
    kernel        a record as a standalone C kernel (.c, .h, main.c, Makefile): export_kernel
    gpu           a CUDA or OpenCL record: its kernels and a host program that launches them
    network_text  the fixed texts of an exported network (model.h, main.c, Makefile)
    network       a whole network as one standalone C library: export_network, write_network

The package stands above the log (``autosched.records``: what is exported is a checked record)
and above ``autosched.graph`` (a network export plans the graph's memory); nothing below it
imports it. Its names are imported by module (``from autosched.export.kernel import
export_kernel``).
"""
