"""MiniGPT: a small GPT in NumPy and its PyTorch port, whose float64 logits are the same bytes.

``numpy_model`` is the reference: a function ``forward(params, idx, cfg)`` over a dict of arrays.
``torch_model.MiniGPT`` is the port as ``nn.Module``s; ``MiniGPT.from_numpy(params, cfg)`` loads
the dict by name.

Why the port is byte-identical in float64. Two programs agree to the bit when they do the same
IEEE-754 operations on the same values in the same order. Elementwise ``+ - * /`` are rounded
correctly everywhere, and gathers, reshapes, ``where``, ``max``, ``clip``, rounding to an integer
and ``frexp`` are exact. What differs between NumPy and PyTorch is everything a library is free
to choose, and we fixed each one:

- Matrix products: BLAS (OpenBLAS for NumPy, MKL or cuBLAS for PyTorch) blocks the K loop,
  keeps several partial sums and fuses multiply-adds. Ours add the K products left to right,
  one multiply and one add per step (``matmul``).
- Sums (LayerNorm's mean and variance, softmax's denominator): NumPy sums pairwise, PyTorch in
  vectorised lanes. Ours add left to right (``row_sum``). ``max`` needs no fixing: it is exact.
- exp (softmax, GELU): each library brings its own, within about one ULP but not the same ULP.
  Ours is range reduction by ln 2 plus a Taylor polynomial, from ``+ - *`` (``exp``).
- sqrt (LayerNorm): ``torch.sqrt`` on the CPU may go through MKL's vector sqrt, not always
  correctly rounded, and which elements do depends on where they sit in the tensor. Ours is
  frexp plus Heron's iteration (``sqrt``).
- GELU: GPT-2's tanh form written as x * sigmoid(2u), so it needs only exp.
- Division by a Python number: PyTorch on a GPU turns ``x / n`` into ``x * (1/n)``, so we write
  the multiply on both sides (LayerNorm's 1/n, attention's 1/sqrt(head_dim)).

With these, every float64 operation of the two forward passes is the same, so the logits are
equal to the bit (tests/test_minigpt.py checks it on several configurations and seeds).
``MiniGPT(cfg, ops="torch")`` swaps in PyTorch's own matmul, sum, exp and sqrt: faster, any
dtype, and equal to NumPy only within a tolerance.
"""

from .numpy_model import GPTConfig, forward, init_params, param_shapes
from .torch_model import OPS, MiniGPT
from .ulp import ulp_distance

__all__ = ["OPS", "GPTConfig", "MiniGPT", "forward", "init_params", "param_shapes", "ulp_distance"]
