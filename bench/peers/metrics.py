"""Accounting of the scoreboard (numpy only): exact active token pairs, effective TF/s, medians, geometric means.

Effective TF/s = 4 * D * (active (query, key) token pairs, summed over heads) / time. A pair is active when its
block is; a partial last block contributes only its real tokens (Wan2.1 720p: 75,600 = 1,181 * 64 + 16), so a
ragged tail is counted exactly, never as a whole block.
"""
from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence

import numpy as np


def _lengths(n: int, b: int) -> np.ndarray:
    nb = -(-n // b)
    out = np.full(nb, b, dtype=np.int64)
    if nb:
        out[-1] = n - b * (nb - 1)
    return out


def active_pairs(mask: np.ndarray, n_q: int, n_kv: int, block_q: int, block_kv: int) -> int:
    """Active (query, key) token pairs of a block mask [..., n_qb, n_kvb] (any leading dims, summed), exact.

    Per row: B_KV * (active blocks) + (len_last - B_KV) * [last block active], times the row's query tokens.
    Works on bool arrays of any size without an int64 copy of the mask."""
    m = np.asarray(mask)
    if m.ndim < 2:
        raise ValueError("mask must have at least 2 dims [n_qb, n_kvb]")
    qlen, klen = _lengths(n_q, block_q), _lengths(n_kv, block_kv)
    if m.shape[-2:] != (qlen.size, klen.size):
        raise ValueError(f"mask blocks {m.shape[-2:]} do not match N/B: ({qlen.size}, {klen.size})")
    cnt = m.sum(-1, dtype=np.int64)                                  # [..., n_qb]
    row_tokens = block_kv * cnt + (int(klen[-1]) - block_kv) * m[..., -1].astype(np.int64)
    return int((row_tokens * qlen).sum())


def flops(pairs: int, head_dim: int) -> float:
    """Effective FLOPs: 2 * D for q.k and 2 * D for p.v per active pair."""
    return 4.0 * head_dim * pairs


def tflops(pairs: int, head_dim: int, ms: Optional[float]) -> Optional[float]:
    if ms is None or not ms > 0:
        return None
    return flops(pairs, head_dim) / (ms * 1e-3) / 1e12


def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("median of no samples")
    s = sorted(xs)
    n = len(s)
    return float(s[n // 2]) if n % 2 else float(0.5 * (s[n // 2 - 1] + s[n // 2]))


def geomean(xs: Iterable[float]) -> Optional[float]:
    v = [float(x) for x in xs if x is not None and x > 0 and math.isfinite(x)]
    if not v:
        return None
    return math.exp(sum(math.log(x) for x in v) / len(v))


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| / ||b|| in float64 (numpy twin of the GPU check, for tests)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    nb = np.linalg.norm(b)
    d = np.linalg.norm(a - b)
    return float(d / nb) if nb > 0 else float(d)


BF16_TOLERANCE = 1e-2  # DESIGN.md section 1: relative L2 against a float64 reference, bf16 inputs
