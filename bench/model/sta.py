"""Sliding Tile Attention's token order and joint (video + text) block mask (numpy; bench/model/hunyuan.py).

STA (FastVideo) groups the video tokens of a (T, H, W) grid into tiles of (t, h, w) tokens, tile-major: tile (a, b, c)
of the (T/t, H/h, W/w) tile grid holds its t*h*w tokens in raster order, and a tile is one attention block. The window
rule is bench/peers/workloads.py's sta_head_mask (the table's windows, clamped and never shrunk at the edges).
"""
from __future__ import annotations

import os
import sys
from typing import Sequence, Tuple

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
from bench.peers.workloads import sta_head_mask  # noqa: E402


def sta_token_order(grid: Sequence[int], tile: Sequence[int]) -> np.ndarray:
    """perm [T*H*W] int64: perm[j] = the raster index (t, h, w) of the token at tile-major position j. Every axis of
    the grid must be a multiple of the tile's (HunyuanVideo 768p: 30 x 48 x 80 in tiles of 6 x 8 x 8)."""
    T, H, W = (int(x) for x in grid)
    t, h, w = (int(x) for x in tile)
    if min(T, H, W, t, h, w) < 1 or T % t or H % h or W % w:
        raise ValueError(f"grid {tuple(grid)} is not a whole number of tiles {tuple(tile)}")
    r = np.arange(T * H * W, dtype=np.int64).reshape(T // t, t, H // h, h, W // w, w)
    return r.transpose(0, 2, 4, 1, 3, 5).reshape(-1)


def joint_mask(windows: Sequence[Tuple[int, int, int]], tile_grid: Sequence[int], text: bool) -> np.ndarray:
    """[heads, nb, nb] bool block mask of joint attention with STA on the video tiles: nb = tiles (+ 1 text block
    when `text`): video tile q attends tile j iff j is in q's window of its head; with text, every video tile attends
    the text block and the text block attends every block."""
    nt = int(np.prod(tile_grid))
    nb = nt + (1 if text else 0)
    m = np.zeros((len(windows), nb, nb), dtype=bool)
    cache = {}
    for hd, win in enumerate(windows):
        win = tuple(int(x) for x in win)
        if win not in cache:
            cache[win] = sta_head_mask(win, tuple(int(g) for g in tile_grid))
        m[hd, :nt, :nt] = cache[win]
    if text:
        m[:, :, nt] = True
        m[:, nt, :] = True
    return m
