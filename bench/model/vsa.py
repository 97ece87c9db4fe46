"""VSA's block selection rule on live q/k (Video Sparse Attention's coarse stage), and the cube token order.

Token order. Wan's patchify flattens the latent grid (F, H, W) in raster order (token f * H * W + h * W + w). VSA
attends in a cube order: the grid is tiled by cubes of (ct, ch, cw) = (4, 4, 4) tokens, and a 64-token attention
block is one cube. The Wan2.1 720p grid 21 x 45 x 80 does not divide by 4 on two axes, so its edge cubes are partial.
`cube_token_order` puts the full cubes first (cube raster order; raster order inside a cube), then the tokens of the
partial cubes (again in cube raster order, raster inside a cube). Every 64-token block of the first part is exactly
one cube; the partial cubes' tokens are then grouped into 64-token blocks as they come (for 21 x 45 x 80: 1,100 full
cubes, then 5,200 edge tokens in 82 blocks: 4 x 1 x 16 and 1 x 4 x 16 slabs of four neighbouring partial cubes, one
80-token corner row, the last block 16 tokens). No padding: 75,600 tokens, 1,182 blocks of 64, the last one partial,
so the attention kernels see exactly the model's tokens (FastVideo's VSA instead pads the grid to whole cubes and
tells its kernel each cube's real size; Tessera's contract has no per-token mask inside a block). Attention over a
permuted token order is exact for self-attention, given RoPE is applied before the permutation.

Selection (VSA's coarse stage): q and k are mean-pooled over each block's real tokens, block scores are
q_pool . k_pool (per head; the softmax and 1/sqrt(D) that VSA applies do not change a row's ranking), and each query
block keeps its top-k kv blocks, k = ceil(density * n_kvb) (exactly k per row, as the corpus's VSA model).

numpy-only helpers (token order, block extents) are used by the CPU tests; the torch functions run on the GPU.
"""
from __future__ import annotations

import math
from typing import Sequence, Tuple

import numpy as np


def cube_token_order(grid: Sequence[int], cube: Sequence[int] = (4, 4, 4)) -> np.ndarray:
    """Block token order of a raster (F, H, W) token grid: perm[p] = the raster index of the token at position p.

    grid: (F, H, W) tokens after patchify (Wan2.1 720p: (21, 45, 80)); cube: tokens per cube on each axis.
    Returns int64 [F * H * W], a permutation: the full cubes first, then the partial cubes' tokens (module doc).
    """
    grid = tuple(int(g) for g in grid)
    cube = tuple(int(c) for c in cube)
    if len(grid) != 3 or min(grid) < 1:
        raise ValueError(f"grid: need three positive extents (F, H, W), got {grid}")
    if len(cube) != 3 or min(cube) < 1:
        raise ValueError(f"cube: need three positive extents, got {cube}")
    f, h, w = np.meshgrid(*(np.arange(g) for g in grid), indexing="ij")
    f, h, w = f.ravel(), h.ravel(), w.ravel()
    full = [g // c for g, c in zip(grid, cube)]  # full cubes per axis
    partial = (f // cube[0] >= full[0]) | (h // cube[1] >= full[1]) | (w // cube[2] >= full[2])
    ncube = [-(-g // c) for g, c in zip(grid, cube)]
    cube_id = ((f // cube[0]) * ncube[1] + h // cube[1]) * ncube[2] + w // cube[2]
    raster = np.arange(f.size)
    # np.lexsort: the last key is the primary one. Stable: raster order inside a cube.
    return np.lexsort((raster, cube_id, partial.astype(np.int8))).astype(np.int64)


def n_blocks(n: int, block: int) -> int:
    """ceil(n / block): blocks of `block` tokens over n tokens, the last one possibly partial."""
    return -(-int(n) // int(block))


def block_token_counts(n: int, block: int) -> np.ndarray:
    """Real tokens per block: int64 [n_blocks(n, block)], all `block` but a partial last one."""
    nb = n_blocks(n, block)
    c = np.full(nb, block, dtype=np.int64)
    c[-1] = n - block * (nb - 1)
    return c


def topk_count(n_kvb: int, density: float) -> int:
    """kv blocks kept per query block: ceil(density * n_kvb), at least 1, at most n_kvb."""
    if not (0.0 < density <= 1.0):
        raise ValueError(f"density: need 0 < density <= 1, got {density}")
    return max(1, min(int(n_kvb), math.ceil(density * n_kvb - 1e-9)))


# ----------------------------------------------------------------------------------------------- torch (GPU)
def pool_blocks(x, block: int):
    """Mean of each block's real tokens. x: torch [B, N, H, D] (any float dtype), block: tokens per block.
    Returns float32 [B, H, n_blocks, D] (sums in float32, divided by the block's real token count)."""
    import torch

    b, n, h, d = x.shape
    nb_full = n // block
    parts = []
    if nb_full:
        parts.append(x[:, :nb_full * block].reshape(b, nb_full, block, h, d).sum(2, dtype=torch.float32) / block)
    if n % block:
        parts.append(x[:, nb_full * block:].sum(1, keepdim=True, dtype=torch.float32) / (n % block))
    return torch.cat(parts, 1).permute(0, 2, 1, 3) if len(parts) > 1 else parts[0].permute(0, 2, 1, 3)


def vsa_topk(q, k, block: Tuple[int, int], density: float):
    """VSA's coarse selection on live tensors. q: [B, N_q, H, D], k: [B, N_kv, H, D] torch (CUDA or CPU), in the
    block token order; block: (B_Q, B_KV) tokens; density: fraction of kv blocks kept per query block.
    Returns (counts int32 [B, H, n_qb], indices int32 [B, H, n_qb, K]): Tessera's index-list mask (docs/python.md),
    every row exactly K = topk_count(n_kvb, density) distinct kv blocks, in descending score order."""
    import torch

    if q.dim() != 4 or k.dim() != 4 or q.shape[0] != k.shape[0] or q.shape[2:] != k.shape[2:]:
        raise ValueError(f"q, k: need [B, N, H, D] with the same B, H, D, got {tuple(q.shape)} and {tuple(k.shape)}")
    qp = pool_blocks(q, block[0])
    kp = pool_blocks(k, block[1])
    scores = torch.matmul(qp, kp.transpose(-1, -2))  # [B, H, n_qb, n_kvb] float32
    kk = topk_count(kp.shape[2], density)
    idx = torch.topk(scores, kk, dim=-1, sorted=True).indices.to(torch.int32)
    counts = torch.full(idx.shape[:-1], kk, dtype=torch.int32, device=idx.device)
    return counts, idx


def index_lists_to_dense(idx, n_kvb: int):
    """[B, H, n_qb, K] int kv-block indices (every entry active) -> bool [B, H, n_qb, n_kvb]."""
    import torch

    dense = torch.zeros(*idx.shape[:-1], n_kvb, dtype=torch.bool, device=idx.device)
    return dense.scatter_(-1, idx.long(), True)
