"""Workloads of the peer scoreboard: geometry, fixed seeds and the block-mask recipes (numpy only, no torch).

Every mask is a numpy bool array [H, n_qb, n_kvb] (per-head patterns, batch 1), n_qb = ceil(N / B_Q),
n_kvb = ceil(N / B_KV); the last block of each dimension may be partial (Wan2.1 720p). Each workload draws its mask
from its own numpy Generator (PCG64, `mask_seed`), so a filtered run (--workloads) builds the same masks as a full
one. q, k, v are drawn on the GPU by run.py from `qkv_seed` (workloads of one geometry share them).

Recipes (the h200_baselines.md ones, re-implemented with numpy):
- band + random (the nine families, N = 32,768, 16 heads): per query block row, k = round(density * n_kvb) target
  blocks; a contiguous band of max(1, k // 3) blocks centred on the diagonal column (row * n_kvb) // n_qb (clamped
  at the edges), plus each other block independently with probability (k - band) / n_kvb. Overlaps make the
  realised density slightly lower than the target (0.097 for 0.10).
- real STA (HunyuanVideo 768x1280x117, N = 115,200, 24 heads): the FastVideo window table in corpus/data, one
  (step, layer); along each axis the window of query tile c starts at clamp(c - k // 2, 0, g - k) and covers k
  tiles (grid 5 x 6 x 10 tiles of 384 tokens, tile-major token order). Re-expressed at 128: every 384-block becomes
  its 3 x 3 sub-blocks (same tokens, same pairs), as corpus/sta.cpp refine_blocks does.
- Wan2.1 720p top-k (N = 75,600: 1,182 blocks of 64, the last one 16 tokens; 40 heads): a block score field per
  head, s[i, j] = -|i - j| / w_h + 0.5 * z[i, j] (w_h = 5 + 40 u_h, u_h uniform, z standard normal), and the top
  round(0.1 * n_kvb) = 118 columns of every row (the probe's VSA-like recipe).
- dense: every block active (N = 32,768, 16 heads, blocks of 128); cuDNN runs it through SDPA.
- corpus-eval: whole requests of the mask corpus (every head of one layer at one step of one source), read from the
  files of `tessera masks generate --whole-requests` (corpus_requests.py); one workload per request.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STA_TABLE_NAME = "sta_mask_strategy_hunyuan_768x1280x117.json"
STA_GRID = (5, 6, 10)          # tiles (t, h, w) of HunyuanVideo 768x1280x117
STA_TILE_TOKENS = 384          # 6 x 8 x 8 latent tokens per tile
STA_CASE = (20, 10)            # (denoising step, layer): the h200_baselines.md case (density 0.165)

# name, B_Q, B_KV, target density (h200_baselines.md; Q64K64 at 5 / 10 / 20 %)
FAMILIES: List[Tuple[str, int, int, float]] = [
    ("Q16K16", 16, 16, 0.10), ("Q32K16", 32, 16, 0.10), ("Q32K32", 32, 32, 0.10), ("Q64K32", 64, 32, 0.10),
    ("Q64K64-HD", 64, 64, 0.05), ("Q64K64", 64, 64, 0.10), ("Q64K64-DD", 64, 64, 0.20),
    ("Q128K64", 128, 64, 0.10), ("Q128K128", 128, 128, 0.10),
]
FAMILY_NAMES = [f[0] for f in FAMILIES]


def n_blocks(n: int, b: int) -> int:
    return -(-n // b)


def block_lengths(n: int, b: int) -> np.ndarray:
    """Token count of each of the ceil(n / b) blocks (the last one may be short), int64."""
    nb = n_blocks(n, b)
    out = np.full(nb, b, dtype=np.int64)
    if nb:
        out[-1] = n - b * (nb - 1)
    return out


# ------------------------------------------------------------------------------------------------ mask recipes
def band_random(heads: int, n_qb: int, n_kvb: int, density: float, rng: np.random.Generator) -> np.ndarray:
    """Per-head block mask: a diagonal band (a third of each row's target blocks) plus random blocks."""
    per_row = max(1, int(round(density * n_kvb)))
    band = max(1, per_row // 3)
    rows = np.arange(n_qb)
    diag = (rows * n_kvb) // n_qb
    p = max(0.0, (per_row - band) / n_kvb)
    m = np.zeros((heads, n_qb, n_kvb), dtype=bool)
    for h in range(heads):
        for o in range(-(band // 2), band - band // 2):
            m[h, rows, np.clip(diag + o, 0, n_kvb - 1)] = True
        m[h] |= rng.random((n_qb, n_kvb), dtype=np.float32) < p
    return m


def sta_window_start(c: np.ndarray, k: int, g: int) -> np.ndarray:
    if not 1 <= k <= g:
        raise ValueError(f"STA window {k} outside [1, {g}]")
    return np.clip(c - k // 2, 0, g - k)


def sta_head_mask(window: Sequence[int], grid: Sequence[int] = STA_GRID) -> np.ndarray:
    """[tiles, tiles] bool: query tile q attends kv tile j iff j lies in q's (clamped, never shrunk) window."""
    t, h, w = (np.arange(g) for g in grid)
    coords = np.stack(np.meshgrid(t, h, w, indexing="ij"), -1).reshape(-1, 3)  # tile-major (t, h, w)
    start = np.stack([sta_window_start(coords[:, a], int(window[a]), int(grid[a])) for a in range(3)], 1)
    k = np.asarray(window, dtype=np.int64)
    inside = (coords[None, :, :] >= start[:, None, :]) & (coords[None, :, :] < (start + k)[:, None, :])
    return inside.all(-1)


def load_sta_table(path: Optional[str] = None) -> Dict[str, List[int]]:
    """The FastVideo STA table: {"<step>_<layer>_<head>": [t, h, w]} (corpus/data/README.md)."""
    path = path or os.environ.get("TESSERA_STA_TABLE") or os.path.join(REPO, "corpus", "data", STA_TABLE_NAME)
    with open(path) as f:
        return json.load(f)


def sta_mask(table: Dict[str, List[int]], step: int, layer: int, heads: int = 24) -> np.ndarray:
    return np.stack([sta_head_mask(table[f"{step}_{layer}_{h}"]) for h in range(heads)])


def refine(mask: np.ndarray, factor: int) -> np.ndarray:
    """Re-express a block mask at blocks `factor` times smaller (each block becomes factor x factor sub-blocks)."""
    return np.repeat(np.repeat(mask, factor, axis=-2), factor, axis=-1)


def topk_score_field(heads: int, n_b: int, frac: float, rng: np.random.Generator) -> np.ndarray:
    """Per head and query block, the top round(frac * n_b) kv blocks of a distance-decaying noisy score field."""
    k = max(1, int(round(frac * n_b)))
    idx = np.arange(n_b)
    dist = np.abs(idx[:, None] - idx[None, :]).astype(np.float32)
    m = np.zeros((heads, n_b, n_b), dtype=bool)
    for h in range(heads):
        width = np.float32(5.0 + 40.0 * rng.random())
        s = -dist / width + np.float32(0.5) * rng.standard_normal((n_b, n_b), dtype=np.float32)
        top = np.argpartition(-s, k - 1, axis=1)[:, :k]
        np.put_along_axis(m[h], top, True, axis=1)
    return m


# ------------------------------------------------------------------------------------------------ workloads
@dataclass
class Workload:
    name: str
    group: str                       # families | sta | wan | dense | corpus
    n: int                           # tokens (N_q = N_kv)
    heads: int
    head_dim: int
    block_q: int
    block_kv: int
    mask_seed: int
    qkv_seed: int
    recipe: str
    target_density: Optional[float] = None
    make: Optional[Callable[[], np.ndarray]] = field(default=None, repr=False)
    unsupported: Optional[str] = None  # set: no system runs it; every row is this error
    family: Optional[str] = None       # corpus-eval: the corpus family of the request

    @property
    def n_qb(self) -> int:
        return n_blocks(self.n, self.block_q)

    @property
    def n_kvb(self) -> int:
        return n_blocks(self.n, self.block_kv)

    @property
    def ragged(self) -> bool:
        return self.n % self.block_q != 0 or self.n % self.block_kv != 0

    def mask(self) -> np.ndarray:
        if self.make is None:
            raise RuntimeError(f"{self.name}: {self.unsupported or 'no mask recipe'}")
        m = self.make()
        assert m.shape == (self.heads, self.n_qb, self.n_kvb) and m.dtype == bool, (self.name, m.shape, m.dtype)
        return m

    def describe(self) -> dict:
        return {"name": self.name, "group": self.group, "n": self.n, "heads": self.heads, "head_dim": self.head_dim,
                "block_q": self.block_q, "block_kv": self.block_kv, "dtype": "bf16", "batch": 1,
                "mask_seed": self.mask_seed, "qkv_seed": self.qkv_seed, "target_density": self.target_density,
                "recipe": self.recipe, **({"unsupported": self.unsupported} if self.unsupported else {}),
                **({"family": self.family} if self.family else {})}


def _families(n: int, heads: int, d: int) -> List[Workload]:
    out = []
    for i, (name, bq, bk, dens) in enumerate(FAMILIES):
        seed = 100 + i

        def make(bq=bq, bk=bk, dens=dens, seed=seed):
            return band_random(heads, n_blocks(n, bq), n_blocks(n, bk), dens, np.random.default_rng(seed))

        out.append(Workload(name, "families", n, heads, d, bq, bk, seed, 0,
                            f"band + random, target density {dens:.2f}", dens, make))
    return out


CORPUS_MISSING = ("not run: no whole-request directory (pass --corpus-dir DIR written by `tessera masks generate "
                  "--whole-requests`, or run where build/gpu/bin/tessera exists so that the harness writes one)")


def all_workloads(scale: float = 1.0, sta_case: Tuple[int, int] = STA_CASE,
                  sta_table: Optional[str] = None, corpus_dir: Optional[str] = None,
                  corpus_error: Optional[str] = None, corpus_per_family: Optional[int] = None,
                  corpus_families: Optional[Sequence[str]] = None) -> List[Workload]:
    """The scoreboard's workloads in run order. `scale` < 1 shrinks N and the heads (CPU smoke tests only; the STA
    workloads keep their fixed tile grid and shrink only the heads, the block sizes follow the tile count).
    corpus-eval: one workload per whole request of `corpus_dir` (never scaled); without a directory a single
    `corpus-eval` workload whose rows are the error `corpus_error` (default CORPUS_MISSING)."""
    def sc(x, lo):
        return max(lo, int(round(x * scale)))

    d = 128
    n_fam, h_fam = (32768, 16) if scale == 1.0 else (sc(32768, 512) // 128 * 128, sc(16, 2))
    w = _families(n_fam, h_fam, d)
    step, layer = sta_case
    h_sta = 24 if scale == 1.0 else sc(24, 2)
    tile = STA_TILE_TOKENS if scale == 1.0 else 48   # smoke: same 300-tile grid, 48-token tiles
    n_sta = tile * int(np.prod(STA_GRID))
    sta_recipe = f"real STA table, step {step} layer {layer}, HunyuanVideo 768x1280x117 (5x6x10 tiles)"
    w.append(Workload("STA-HV768-B384", "sta", n_sta, h_sta, d, tile, tile,
                      0, 2, sta_recipe, None,
                      lambda: sta_mask(load_sta_table(sta_table), step, layer, h_sta)))
    w.append(Workload("STA-HV768-B128", "sta", n_sta, h_sta, d, tile // 3, tile // 3, 0, 2,
                      sta_recipe + ", re-expressed at B = 128 (3x3 sub-blocks per tile)", None,
                      lambda: refine(sta_mask(load_sta_table(sta_table), step, layer, h_sta), 3)))
    n_wan, h_wan = (75600, 40) if scale == 1.0 else (sc(75600, 1000) // 64 * 64 + 16, sc(40, 2))
    w.append(Workload("Wan720-topk", "wan", n_wan, h_wan, d, 64, 64, 1, 1,
                      "top 10 % of a block score field per row (distance decay + noise), ragged last block", 0.10,
                      lambda: topk_score_field(h_wan, n_blocks(n_wan, 64), 0.10, np.random.default_rng(1))))
    w.append(Workload("dense-32k", "dense", n_fam, h_fam, d, 128, 128, 0, 0, "all blocks active", 1.0,
                      lambda: np.ones((h_fam, n_blocks(n_fam, 128), n_blocks(n_fam, 128)), dtype=bool)))
    if corpus_dir:
        from .corpus_requests import corpus_workloads

        w.extend(corpus_workloads(corpus_dir, Workload, corpus_families, corpus_per_family))
    else:
        w.append(Workload("corpus-eval", "corpus", 0, 0, d, 0, 0, 0, 0,
                          "corpus evaluation cases as whole requests (one layer at one step, all the model's heads)",
                          None, None, unsupported=corpus_error or CORPUS_MISSING))
    return w


GROUPS = ("families", "sta", "wan", "dense", "corpus")


def _matches(w: Workload, s: str) -> bool:
    """A --workloads item names the workload, its group, or a ':'-prefix of its name (corpus-eval:Q64K64)."""
    return w.name == s or w.group == s or w.name.startswith(s + ":")


def select(workloads: List[Workload], spec: Optional[str]) -> List[Workload]:
    """--workloads: comma-separated names, groups (families, sta, wan, dense, corpus, all) or name prefixes ending
    before a ':' (corpus-eval, corpus-eval:Q64K64); None = all."""
    if not spec or spec == "all":
        return list(workloads)
    want = [s.strip() for s in spec.split(",") if s.strip()]
    names = {w.name for w in workloads}
    for s in want:
        if s not in GROUPS and s != "all" and not any(_matches(w, s) for w in workloads):
            raise ValueError(f"--workloads: unknown workload or group {s!r} (known: {', '.join(sorted(names))}; "
                             f"groups: {', '.join(GROUPS)}, all)")
    if "all" in want:
        return list(workloads)
    return [w for w in workloads if any(_matches(w, s) for s in want)]


def mask_stats(mask: np.ndarray, n: int, block_q: int, block_kv: int) -> dict:
    """Density, active blocks and exact active token pairs (ragged tails counted exactly) of a [H, n_qb, n_kvb]."""
    from .metrics import active_pairs

    cnt = mask.sum(-1)
    return {"density": float(mask.mean()), "active_blocks": int(cnt.sum()),
            "active_pairs": active_pairs(mask, n, n, block_q, block_kv),
            "row_blocks_min": int(cnt.min()), "row_blocks_max": int(cnt.max()),
            "row_blocks_mean": float(cnt.mean())}


__all__ = ["FAMILIES", "FAMILY_NAMES", "Workload", "all_workloads", "select", "band_random", "sta_head_mask",
           "sta_mask", "refine", "topk_score_field", "block_lengths", "n_blocks", "mask_stats", "load_sta_table"]
