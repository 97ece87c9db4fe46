"""Small helpers that treat numpy arrays and torch tensors alike, without importing torch unless it is loaded."""
from __future__ import annotations

import sys

import numpy as np

from .errors import TesseraError

INT32_MAX = 2**31 - 1


# The torch module once the caller has imported it. Kept in a global so that code traced by torch.compile reads a
# constant instead of sys.modules.
_torch = sys.modules.get("torch")


def torch_module():
    """The torch module if it has been imported by the caller, else None (Tessera never imports torch itself for
    numpy inputs)."""
    global _torch
    if _torch is None:
        _torch = sys.modules.get("torch")
    return _torch


def is_torch(x) -> bool:
    """True when x is a torch.Tensor."""
    t = _torch if _torch is not None else torch_module()
    return t is not None and isinstance(x, t.Tensor)


def is_int(x) -> bool:
    """True for Python and numpy integers (not bool). Python ints are tested first (cheap under torch.compile)."""
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    return isinstance(x, np.integer)


def is_numpy(x) -> bool:
    return isinstance(x, np.ndarray)


def is_array(x) -> bool:
    return is_numpy(x) or is_torch(x)


def is_cuda(x) -> bool:
    return is_torch(x) and x.is_cuda


def dtype_name(x) -> str:
    return str(x.dtype).replace("torch.", "")


def as_int32(x, name: str):
    """x as a contiguous int32 array of the same kind and device. Other integer dtypes are converted on the CPU
    (after a range check); CUDA tensors must already be int32 (no hidden copies or device-to-host syncs).
    Raises TesseraError(name) for non-integer dtypes, out-of-range values or CUDA tensors of another integer type."""
    t = _torch
    if t is not None and isinstance(x, t.Tensor) and x.dtype == t.int32 and x.is_contiguous():
        return x  # the common case, kept cheap
    if is_numpy(x):
        if x.dtype == np.int32:
            return np.ascontiguousarray(x)
        if x.dtype.kind not in "iu":
            raise TesseraError(name, f"expected an integer array (int32), got dtype {x.dtype}")
        if x.size and (x.min() < -INT32_MAX - 1 or x.max() > INT32_MAX):
            raise TesseraError(name, "values do not fit in int32")
        return np.ascontiguousarray(x.astype(np.int32))
    if is_torch(x):
        torch = torch_module()
        if x.dtype == torch.int32:
            return x.contiguous()
        if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
            raise TesseraError(name, f"expected an integer tensor (int32), got dtype {dtype_name(x)}")
        if x.is_cuda:
            raise TesseraError(name, f"CUDA index tensors must be int32 (got {dtype_name(x)}); convert with .int()")
        if x.numel() and (int(x.min()) < -INT32_MAX - 1 or int(x.max()) > INT32_MAX):
            raise TesseraError(name, "values do not fit in int32")
        return x.to(torch.int32).contiguous()
    raise TesseraError(name, f"expected a numpy array or torch tensor, got {type(x).__name__}")
