"""minikernel: GPU kernels in CUDA C and Triton, written to be read, tested and measured.

Set ``TRITON_INTERPRET=1`` before importing to run the Triton kernels on CPU tensors.
"""

from minikernel import minigpt
from minikernel.kernels.add_bias import add_bias
from minikernel.kernels.attention import attention
from minikernel.kernels.matmul import matmul
from minikernel.kernels.softmax import softmax
from minikernel.kernels.transpose import copy2d, transpose
from minikernel.kernels.vector_add import vector_add

__version__ = "0.1.0"
__all__ = [
    "__version__",
    "add_bias",
    "attention",
    "copy2d",
    "matmul",
    "minigpt",
    "softmax",
    "transpose",
    "vector_add",
]
