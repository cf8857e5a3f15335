"""Backends that lower the tile IR to machine code.  ``newt.backend.cuda`` is the CUDA one."""
