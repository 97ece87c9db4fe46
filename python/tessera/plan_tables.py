"""User plan tables: :func:`load_plan_table` makes selection use a table the user compiled for their GPU and
sparsifier (``tessera profile --masks`` -> ``tessera compile-table``; docs/selection.md) instead of the embedded one.

The loaded table is process-wide: it applies to every later :func:`tessera.block_sparse_attention` /
:func:`tessera.explain` call, on the CPU path and on every CUDA device; ``load_plan_table(None)`` restores the
embedded tables. The dispatch dict's ``table_status`` says which table selected the plan.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

from .errors import TesseraError, TesseraRuntimeError

__all__ = ["load_plan_table", "plan_table"]

_active: Optional[Dict[str, Any]] = None  # summary of the loaded user table (check_plan_table), None = embedded


def load_plan_table(path) -> Optional[Dict[str, Any]]:
    """Makes plan selection use the plan-table artifact at ``path`` (a str or os.PathLike), or the embedded tables
    again when ``path`` is None.

    The file is read and checked now, as strictly as the embedded table: format name, ``format_version``, this
    build's ``catalog_version``, a known ``arch``, feature schema, trees and rankings. A table that fails is never
    used and never silently replaced: the error names the file, and the table in use before the call stays in use.
    Keys the table has no tree for get the documented default plan (``source`` "default"), as with the embedded
    table. The CPU path then selects as on the table's ``arch``; a CUDA device whose architecture is not the table's
    raises on its next call (TesseraRuntimeError, argument "plan_table_path", naming the file).

    Returns the table's summary (``path`` absolute, ``arch``, ``catalog_version``, ``gpu_name``, ``keys``,
    ``status``), or None for ``path=None``.

    Raises:
      TesseraError("plan_table_path"): the file is missing, unreadable or a directory (``code`` "io error"), or not
        a table this build can use (``code`` "format error": corrupt JSON, another catalog_version or
        format_version, an unknown arch, a ranking that does not end with its base plan, ...); the message names
        the file. Also for a ``path`` that is neither None, a str nor os.PathLike, or an empty path (``code``
        "invalid argument").
    """
    global _active
    from .api import _C  # the native module, imported on first use

    native = _C()
    if path is None:
        if native.has_cuda():
            native.set_plan_table_path("")
        _active = None
        return None
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TesseraError("plan_table_path", f"expected a path (str or os.PathLike) or None, got {path!r}"[:200])
    if os.fspath(path) == "":
        raise TesseraError("plan_table_path", "empty path (pass None to go back to the embedded tables)")
    full = os.path.abspath(os.fspath(path))
    try:
        info = dict(native.check_plan_table(full))
    except TesseraRuntimeError as e:  # I/O and format errors of the file: an argument the caller can fix
        raise TesseraError(e.argument or "plan_table_path", e.message, code=e.code) from e
    if native.has_cuda():
        native.set_plan_table_path(full)
    _active = info
    return dict(info)


def plan_table() -> Optional[Dict[str, Any]]:
    """The summary of the loaded user table (as :func:`load_plan_table` returned it), or None when the embedded
    tables are in use."""
    return None if _active is None else dict(_active)
