"""Tessera: dynamic block-sparse attention for video diffusion transformers.

Main entry points (see docs/python.md):

- :func:`block_sparse_attention` -- O (and LSE) of E(M) for torch tensors (CUDA or CPU) or numpy arrays (CPU).
- :func:`explain` -- the plan and regime Tessera chooses for a request, with the mask statistics.
- :func:`from_flex_block_mask`, :func:`from_flashinfer_bsr` -- mask converters from FlexAttention and FlashInfer.
- :func:`load_plan_table` -- select plans with a user-built plan table instead of the embedded one.
- :mod:`tessera.attn_processor` -- `TesseraAttnProcessor`, a diffusers attention processor for Wan-style DiT
  self-attention with a mask computed per call (imported on demand; needs torch).
- :mod:`tessera.distributed` -- :func:`~tessera.distributed.ulysses_attention`, sequence-parallel attention over
  torch.distributed (imported on first use: it needs torch).

torch is optional: numpy arrays run the CPU plan executor (float64) without it.
"""
# The native module may live in a build directory (<build>/python/tessera/_C*.so) while these sources stay in the
# tree: let the package span every `tessera` directory on sys.path.
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from .api import block_sparse_attention, explain, last_dispatch  # noqa: E402
from .converters import MaskSpec, from_dense, from_flashinfer_bsr, from_flex_block_mask  # noqa: E402
from .errors import TesseraError, TesseraRuntimeError, TesseraUnsupportedError  # noqa: E402
from .plan_tables import load_plan_table, plan_table  # noqa: E402

__all__ = [
    "block_sparse_attention", "explain", "last_dispatch", "MaskSpec", "from_dense", "from_flashinfer_bsr",
    "from_flex_block_mask", "load_plan_table", "plan_table", "TesseraError", "TesseraRuntimeError",
    "TesseraUnsupportedError",
]


def __getattr__(name):
    """`tessera.distributed` is imported on first access (it imports torch; the rest of the package does not);
    `tessera.__version__` is the native library's version string (e.g. "0.1.0"; TesseraUnsupportedError when the
    native module is not built)."""
    if name == "distributed":
        import importlib

        return importlib.import_module(".distributed", __name__)
    if name == "__version__":
        from .api import _C

        return _C().version()
    raise AttributeError(f"module 'tessera' has no attribute {name!r}")
