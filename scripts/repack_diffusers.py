#!/usr/bin/env python3
"""Trims a diffusers wheel (pure Python) to what the model-level loop (bench/model) needs: the model code.

Dropped: diffusers/pipelines/ (all but its __init__.py, which the lazy top-level module names) and
diffusers/modular_pipelines/ (all but its __init__.py): the pipelines load tokenizers, VAEs and weights from a hub,
which the GPU machine cannot reach. Kept: everything else (models, schedulers, loaders, hooks, quantizers, utils,
configuration), so `from diffusers.models.transformers.transformer_wan import WanTransformer3DModel` imports as from the
full wheel (checked on the CPU machine by importing it and running a tiny configuration, see bench/model/README.md).
0.36.0: 4.4 -> about 1.7 MiB. The output keeps the input's file name.

Usage: repack_diffusers.py IN.whl OUT_DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repack_flashinfer import repack  # noqa: E402  (the wheel rewrite with a fresh RECORD)

DROP = ("diffusers/pipelines/", "diffusers/modular_pipelines/")


def keep(name: str, deps: set) -> bool:
    for d in DROP:
        if name.startswith(d):
            return name == d + "__init__.py"
    return True


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    os.makedirs(argv[1], exist_ok=True)
    repack(argv[0], argv[1], set(), keep_fn=keep, tool="repack_diffusers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
