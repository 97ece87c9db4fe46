"""The corpus-eval workloads: whole requests of the mask corpus (numpy only, no torch, no safetensors package).

A whole request is one layer at one denoising step of one corpus source with every head of the model's layer
(docs/corpus.md, "Whole requests"), written by

    tessera masks generate --whole-requests --families F ... --split evaluation --cases-per-family K --out DIR

as the corpus's mask files (safetensors, tensor `mask` U8 [1, H, n_qb, ceil(n_kvb / 8)], bits packed like
numpy.packbits along the kv-block axis) plus DIR/manifest.json ("whole_requests": true). Each file becomes one
workload (one row per request and system) named `corpus-eval:<family>:<source_id>:c<chunk>_<index>`, group
"corpus"; the report adds the per-family geometric means. N is the mask file's n_q (= n_kv; padded for tiled token
orders, whose padding tokens the kernels attend like any other, so they count in TF/s), a ragged last block is
handled like Wan2.1's.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

FORMAT = "tessera-mask-v1"
CORPUS_FAMILIES = ("Q16K16", "Q32K16", "Q32K32", "Q64K32", "Q64K64-HD", "Q64K64", "Q64K64-DD", "Q128K64",
                   "Q128K128", "STA-real")
PREFIX = "corpus-eval"
QKV_SEED = 3
HEAD_DIM = 128


class MaskFileError(ValueError):
    """A file that is not a well-formed Tessera mask file (the message names the file and the field)."""


def _int(meta: Dict[str, str], key: str, path: str, lo: int = 0) -> int:
    v = meta.get(key)
    if not isinstance(v, str) or not v.isdigit() or int(v) < lo:
        raise MaskFileError(f"{path}: metadata {key!r} = {v!r} is not an integer >= {lo}")
    return int(v)


def read_mask_file(path: str) -> Tuple[Dict[str, str], np.ndarray]:
    """(metadata, dense bool mask [H, n_qb, n_kvb]) of one mask file; checks the header against the bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise MaskFileError(f"{path}: shorter than a safetensors header")
    (hlen,) = struct.unpack("<Q", raw[:8])
    if hlen > len(raw) - 8:
        raise MaskFileError(f"{path}: header length {hlen} exceeds the file")
    try:
        header = json.loads(raw[8:8 + hlen])
    except ValueError as e:
        raise MaskFileError(f"{path}: header is not JSON ({e})") from None
    meta = header.get("__metadata__")
    t = header.get("mask")
    if not isinstance(meta, dict) or not isinstance(t, dict):
        raise MaskFileError(f"{path}: no __metadata__ or no tensor 'mask'")
    if meta.get("format") != FORMAT:
        raise MaskFileError(f"{path}: metadata 'format' is {meta.get('format')!r}, not {FORMAT!r}")
    heads, n_qb, n_kvb = (_int(meta, k, path, 1) for k in ("heads", "n_qb", "n_kvb"))
    row = -(-n_kvb // 8)
    if t.get("dtype") != "U8" or t.get("shape") != [1, heads, n_qb, row]:
        raise MaskFileError(f"{path}: tensor 'mask' is {t.get('dtype')} {t.get('shape')}, expected U8 "
                            f"[1, {heads}, {n_qb}, {row}]")
    nbytes = heads * n_qb * row
    if t.get("data_offsets") != [0, nbytes] or len(raw) != 8 + hlen + nbytes:
        raise MaskFileError(f"{path}: tensor 'mask' data_offsets {t.get('data_offsets')} / file size "
                            f"{len(raw)} do not hold exactly {nbytes} bytes")
    packed = np.frombuffer(raw, dtype=np.uint8, count=nbytes, offset=8 + hlen).reshape(heads, n_qb, row)
    dense = np.unpackbits(packed, axis=-1, count=n_kvb).astype(bool)
    for key, b, nb in (("n_q", "block_q", n_qb), ("n_kv", "block_kv", n_kvb)):
        n, blk = _int(meta, key, path, 1), _int(meta, b, path, 1)
        if -(-n // blk) != nb:
            raise MaskFileError(f"{path}: metadata {key} = {n} / {b} = {blk} disagrees with {nb} blocks")
    return meta, dense


def read_manifest(corpus_dir: str) -> Dict[str, Any]:
    path = os.path.join(corpus_dir, "manifest.json")
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise FileNotFoundError(f"--corpus-dir: {path}: {e.strerror}") from None
    if doc.get("whole_requests") is not True:
        raise ValueError(f"--corpus-dir: {path} is not a whole-request directory (write one with `tessera masks "
                         f"generate --whole-requests ...`)")
    return doc


def _workload_name(e: Dict[str, Any]) -> str:
    return f"{PREFIX}:{e['family']}:{e['source_id']}:c{int(e['chunk']):02d}_{int(e['index']):04d}"


def corpus_workloads(corpus_dir: str, workload_cls, families: Optional[Sequence[str]] = None,
                     per_family: Optional[int] = None) -> List[Any]:
    """One Workload per whole request of the directory (manifest order), at most `per_family` per family."""
    doc = read_manifest(corpus_dir)
    out: List[Any] = []
    taken: Dict[str, int] = {}
    for e in doc.get("cases", []):
        fam = e["family"]
        if families is not None and fam not in families:
            continue
        if per_family is not None and taken.get(fam, 0) >= per_family:
            continue
        taken[fam] = taken.get(fam, 0) + 1
        if int(e["n_q"]) != int(e["n_kv"]):
            raise ValueError(f"{e['file']}: n_q {e['n_q']} != n_kv {e['n_kv']} (self-attention only)")
        path = os.path.join(corpus_dir, e["file"])

        def make(path=path, e=e):
            meta, m = read_mask_file(path)
            if int(meta["heads"]) != int(e["heads"]):
                raise MaskFileError(f"{path}: {meta['heads']} heads, the manifest says {e['heads']}")
            return m

        recipe = (f"whole request of corpus case {e['index']} ({e['family']}, {e['source_id']}: {e['sparsifier']} "
                  f"{e['kind']} on {e['model']}, chunk {e['chunk']}, step {e['step']}, layer {e['layer']}, "
                  f"{e['split']} split, all {e['heads']} heads; seed {doc.get('seed')}), file {e['file']}")
        w = workload_cls(_workload_name(e), "corpus", int(e["n_q"]), int(e["heads"]), HEAD_DIM, int(e["block_q"]),
                         int(e["block_kv"]), int(e["index"]), QKV_SEED, recipe, float(e["density"]), make)
        w.family = fam
        out.append(w)
    if not out:
        raise ValueError(f"--corpus-dir: {corpus_dir} holds no whole request"
                         + (f" of the families {', '.join(families)}" if families else ""))
    return out


def find_tessera_bin(repo: str, explicit: Optional[str] = None) -> Optional[str]:
    if explicit:
        return explicit
    for preset in ("gpu", "ci", "dev"):
        p = os.path.join(repo, "build", preset, "bin", "tessera")
        if os.access(p, os.X_OK):
            return p
    return None


def generate_command(tessera: str, out: str, families: Sequence[str], per_family: int,
                     split: str = "evaluation", threads: Optional[int] = None) -> List[str]:
    cmd = [tessera, "masks", "generate", "--whole-requests", "--families", *families, "--split", split,
           "--cases-per-family", str(per_family), "--out", out]
    if threads:
        cmd += ["--threads", str(threads)]
    return cmd


def generate(tessera: str, out: str, families: Sequence[str], per_family: int, timeout_s: float,
             split: str = "evaluation") -> str:
    """Runs `tessera masks generate --whole-requests` into `out` (reused when it already holds a manifest written
    with the same families and count); returns `out`. Raises RuntimeError with the command's stderr."""
    mf = os.path.join(out, "manifest.json")
    if os.path.exists(mf):
        try:
            doc = read_manifest(out)
            fams = sorted({e["family"] for e in doc.get("cases", [])})
            if (doc.get("requests_per_family") == per_family and doc.get("requests_split") == split
                    and fams == sorted(families)):
                return out
        except (OSError, ValueError):
            pass
        raise RuntimeError(f"{out} already holds other whole requests: remove it or pass --corpus-dir")
    cmd = generate_command(tessera, out, families, per_family, split)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if p.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    return out


__all__ = ["read_mask_file", "read_manifest", "corpus_workloads", "find_tessera_bin", "generate_command",
           "generate", "MaskFileError", "CORPUS_FAMILIES", "PREFIX"]
