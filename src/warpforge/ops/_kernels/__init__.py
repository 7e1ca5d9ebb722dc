"""Triton kernels, one module per op family; imported only when a kernel launches."""
