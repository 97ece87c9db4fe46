#!/usr/bin/env python3
"""Generic block masks for the plan table: sparsifier-agnostic recipes written as mask files for
`tessera profile --masks` (docs/selection.md, "The embedded H200 table ... generic masks").

Why: the corpus's families each hold two or three published sparsifiers at fixed model geometries, so a tree can
separate its sources by a proxy (sequence length) instead of the mask structure that decides the plan. Q128K64 is
the measured case: SVG (long runs, N ~ 31K) wants Coarsened-KV c2, SpargeAttn (scattered, N = 75,600) packed KV,
and the tree split on seq_len, so a scattered mask at N = 32,768 got the c2 plan at 340 TF/s where packed runs 525
(bench/NOTES.md, session 12). These recipes put scattered and banded masks at several lengths into the profile:
- band_random: the peer scoreboard's recipe (bench/peers/workloads.py band_random): a diagonal band of a third of
  each row's target blocks plus independent random blocks;
- topk: top round(density * n_kvb) kv blocks per query block of a score field -|c_i - j| / w_h + 0.5 z (the
  VSA-like recipe of the scoreboard's Wan2.1 workload, generalised to B_Q != B_KV; w_h in tokens = 64 (5 + 40 u_h)).
Seeds are 1000 + (family, recipe, request), never the scoreboard's (100 + family, 1). Per (family, recipe): four
profiling requests (N = 16,384 x 12 heads, 45,056 x 24, and since session 16 32,768 x 16 and 24,576 x 40, so that
full grids of balanced masks are not outnumbered by the corpus's whole requests in the leaves that serve them) and one
evaluation request (N = 32,768 x 16 heads, the scoreboard's geometry with other draws); density: the family's target
times 0.8 / 1.2 / 1.0 / 0.9 / 1.1 (in the order of REQUESTS, whose indices name the files and the cases).

Usage: bench/generic_masks.py --out DIR [--families Q128K64,...]   |   bench/generic_masks.py --list [--families ...]
Files: DIR/<family>__<recipe>__r<k>.safetensors (the corpus mask-file format, kind "synthetic").
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers.paths import out_dir_error  # noqa: E402
from peers.workloads import FAMILIES, band_random, n_blocks  # noqa: E402

RECIPES = ("band_random", "topk")
# (split, N, heads, density factor) per request index
REQUESTS = (("profiling", 16384, 12, 0.8), ("profiling", 45056, 24, 1.2), ("evaluation", 32768, 16, 1.0),
            ("profiling", 32768, 16, 0.9), ("profiling", 24576, 40, 1.1))


def topk_field(heads: int, n_qb: int, n_kvb: int, bq: int, bkv: int, density: float,
               rng: np.random.Generator) -> np.ndarray:
    """[heads, n_qb, n_kvb] bool: the top round(density * n_kvb) columns of every row of a banded noisy field."""
    k = max(1, int(round(density * n_kvb)))
    centre = ((np.arange(n_qb) + 0.5) * bq / bkv - 0.5)[:, None]
    cols = np.arange(n_kvb)[None, :]
    m = np.zeros((heads, n_qb, n_kvb), dtype=bool)
    for h in range(heads):
        w = 64.0 * (5.0 + 40.0 * rng.random()) / bkv  # band width in kv blocks
        s = -np.abs(centre - cols) / w + 0.5 * rng.standard_normal((n_qb, n_kvb), dtype=np.float32)
        top = np.argpartition(-s, k - 1, axis=1)[:, :k]
        np.put_along_axis(m[h], top, True, axis=1)
    return m


def write_mask_file(path: str, dense: np.ndarray, meta: dict) -> None:
    """The corpus mask-file format (corpus/mask_file.cpp): safetensors, one bit-packed U8 tensor 'mask'."""
    heads, n_qb, n_kvb = dense.shape
    packed = np.packbits(dense, axis=-1)
    md = {"format": "tessera-mask-v1",
          "bit_order": "numpy.packbits(dense, axis=-1), big-endian bits, rows padded to whole bytes",
          "heads": str(heads), "n_qb": str(n_qb), "n_kvb": str(n_kvb), **{k: str(v) for k, v in meta.items()}}
    header = json.dumps({"__metadata__": md, "mask": {"dtype": "U8", "shape": [1, *packed.shape],
                                                      "data_offsets": [0, packed.size]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + packed.tobytes())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="directory for the mask files (created if missing; needed unless --list)")
    ap.add_argument("--families", default=",".join(f[0] for f in FAMILIES),
                    help="comma-separated families (default: the nine of bench/peers/workloads.py)")
    ap.add_argument("--list", action="store_true", help="print the requests (file name, split, N, heads, density, "
                                                        "seed) and exit; writes nothing")
    a = ap.parse_args(argv)
    spec = {f[0]: f for f in FAMILIES}
    fams = [f.strip() for f in a.families.split(",") if f.strip()]
    unknown = [f for f in fams if f not in spec]
    if unknown:
        ap.error(f"--families: unknown {', '.join(map(repr, unknown))} (known: {', '.join(spec)})")
    if not fams:
        ap.error(f"--families: no family given (known: {', '.join(spec)})")
    if not a.list:
        if a.out is None:
            ap.error("--out: required (the directory for the mask files)")
        err = out_dir_error(a.out)
        if err:
            ap.error(err)
    for fam in fams:
        _, bq, bkv, dens = spec[fam]
        fi = FAMILIES.index(spec[fam])
        for ri, recipe in enumerate(RECIPES):
            for k, (split, n, heads, factor) in enumerate(REQUESTS):
                seed = 1000 + 100 * fi + 10 * ri + k
                d = dens * factor
                name = f"{fam}__{recipe}__r{k}.safetensors"
                if a.list:
                    print(f"{name} {split} N={n} heads={heads} density={d:.3f} seed={seed}", flush=True)
                    continue
                path = os.path.join(a.out, name)
                rng = np.random.default_rng(seed)
                n_qb, n_kvb = n_blocks(n, bq), n_blocks(n, bkv)
                m = (band_random(heads, n_qb, n_kvb, d, rng) if recipe == "band_random"
                     else topk_field(heads, n_qb, n_kvb, bq, bkv, d, rng))
                try:
                    write_mask_file(path, m, {
                        "family": fam, "source_id": f"generic-{recipe}", "model": f"generic-n{n}",
                        "sparsifier": recipe, "kind": "synthetic", "token_order": "raster", "split": split,
                        "head_ids": ",".join(map(str, range(heads))),
                        "notes": json.dumps({"recipe": recipe, "target_density": d, "generator": "bench/generic_masks.py"}),
                        "n_q": n, "n_kv": n, "tokens_real": n, "block_q": bq, "block_kv": bkv,
                        "step": 0, "layer": 0, "chunk": 100 * fi + 10 * ri + k, "index": k, "seed": seed})
                except OSError as ex:
                    print(f"generic_masks: cannot write {path}: {ex.strerror or ex}", file=sys.stderr)
                    return 1
                print(f"{path} {split} density {m.mean():.4f}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `--list | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
