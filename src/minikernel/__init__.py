"""minikernel: GPU kernels in CUDA C and Triton, written to be read, tested and measured.

Set ``TRITON_INTERPRET=1`` before importing to run the Triton kernels on CPU tensors.
"""

from minikernel.kernels.vector_add import vector_add

__version__ = "0.1.0"
__all__ = ["__version__", "vector_add"]
