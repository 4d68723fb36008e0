"""Distance between float64 values counted in ULPs (units in the last place)."""

from __future__ import annotations

import numpy as np

__all__ = ["ulp_distance"]


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many float64 values lie between a and b, elementwise: 0 when they are the same value.

    A float64's bits, read as an int64, grow with the value for positive numbers; mapping a
    negative number's bits to minus its magnitude's bits makes the order hold across zero
    (+0.0 and -0.0 both map to 0). The difference of two mapped values is then the count of
    representable values between them. NaN is not handled.
    """
    a = np.ascontiguousarray(a, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    ia, ib = a.view(np.int64), b.view(np.int64)
    ia = np.where(ia < 0, np.iinfo(np.int64).min - ia, ia)
    ib = np.where(ib < 0, np.iinfo(np.int64).min - ib, ib)
    # Subtract as unsigned: the true difference can pass 2**63 but never 2**64.
    ua, ub = ia.view(np.uint64), ib.view(np.uint64)
    return np.where(ia >= ib, ua - ub, ub - ua)
