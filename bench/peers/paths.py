"""The output directory of a bench script, checked (and created) before any work, so that a bad --out is a message
naming the option rather than a traceback after minutes of measuring."""
from __future__ import annotations

import os


def out_dir_error(path: str, option: str = "--out") -> str:
    """Creates `path` if missing; returns "" when it is a writable directory, else the error message naming `option`
    (an empty path, an existing file, a directory that cannot be created, one that is not writable)."""
    if not path:
        return f"{option}: empty path"
    if os.path.exists(path) and not os.path.isdir(path):
        return f"{option}: {path!r} exists and is not a directory"
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as ex:
        return f"{option}: cannot create {path!r}: {ex.strerror or ex}"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{option}: {path!r} is not writable"
    return ""
