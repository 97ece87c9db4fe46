"""Exceptions raised by Tessera.

Every error names the argument it concerns (``.argument``, a dotted path such as ``"q"``, ``"block_size"`` or
``"mask.col_indices"``) and is raised before anything is launched or written.

- :class:`TesseraError` (a ``ValueError``): an argument violates the contract (shape, dtype, stride, range, ...).
- :class:`TesseraUnsupportedError` (a ``TesseraError`` and a ``NotImplementedError``): valid in principle, not
  supported by this build or GPU (e.g. head_dim 96 on the GPU today).
- :class:`TesseraRuntimeError` (a ``RuntimeError``): a CUDA call failed, a file was unreadable or malformed, or an
  internal invariant failed.
"""
from __future__ import annotations

__all__ = ["TesseraError", "TesseraUnsupportedError", "TesseraRuntimeError"]


class _ArgumentMixin:
    code: str
    argument: str
    message: str

    def _init(self, code: str, argument: str, message: str) -> str:
        self.code = code
        self.argument = argument
        self.message = message
        return f"tessera: {argument}: {message}" if argument else f"tessera: {message}"


class TesseraError(_ArgumentMixin, ValueError):
    """Invalid argument. Attributes: ``code`` ("invalid argument"), ``argument`` (name), ``message``."""

    def __init__(self, argument: str, message: str, code: str = "invalid argument"):
        super().__init__(self._init(code, argument, message))


class TesseraUnsupportedError(TesseraError, NotImplementedError):
    """Valid in principle, not supported by this build or device. Same attributes as :class:`TesseraError`."""

    def __init__(self, argument: str, message: str, code: str = "unsupported"):
        super().__init__(argument, message, code)


class TesseraRuntimeError(_ArgumentMixin, RuntimeError):
    """CUDA, I/O, format or internal error. Attributes: ``code``, ``argument`` (may be empty), ``message``."""

    def __init__(self, argument: str, message: str, code: str = "internal"):
        super().__init__(self._init(code, argument, message))


def _from_native(code: str, argument: str, message: str) -> Exception:
    """Builds the Python exception for a tessera::Error (called by the extension's exception translator)."""
    if code == "invalid argument":
        return TesseraError(argument, message)
    if code == "unsupported":
        return TesseraUnsupportedError(argument, message)
    return TesseraRuntimeError(argument, message, code)
