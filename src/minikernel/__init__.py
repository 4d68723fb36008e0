"""minikernel: GPU kernels in CUDA C and Triton, written to be read, tested and measured.

Set ``TRITON_INTERPRET=1`` before importing to run the Triton kernels on CPU tensors.
"""

from minikernel import minigpt
from minikernel.kernels.add_bias import add_bias
from minikernel.kernels.attention import attention
from minikernel.kernels.cross_entropy import cross_entropy, linear_cross_entropy
from minikernel.kernels.matmul import matmul
from minikernel.kernels.rmsnorm import RMSNorm, rms_norm
from minikernel.kernels.softmax import softmax
from minikernel.kernels.transpose import copy2d, transpose
from minikernel.kernels.vector_add import vector_add

__version__ = "0.1.0"
__all__ = [
    "RMSNorm",
    "__version__",
    "add_bias",
    "attention",
    "copy2d",
    "cross_entropy",
    "linear_cross_entropy",
    "matmul",
    "minigpt",
    "rms_norm",
    "softmax",
    "transpose",
    "vector_add",
]
