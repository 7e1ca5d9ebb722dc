"""Triton kernels, one module per op family. Importing a module here imports triton."""
