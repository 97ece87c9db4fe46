"""Test oracle shared by the Python tests: the clamped Sliding Tile Attention window rule written as plain loops
(h200_baselines.md): along each axis the window of query tile c starts at clamp(c - k // 2, 0, g - k) and covers k
tiles. Returns the [n, n] bool tile mask of one head (n = the grid's tile count) for `window` = (k_t, k_h, k_w)."""
import numpy as np


def sta_window_mask(window, grid=(5, 6, 10)):
    n = grid[0] * grid[1] * grid[2]
    m = np.zeros((n, n), dtype=bool)
    for t in range(grid[0]):
        for h in range(grid[1]):
            for w in range(grid[2]):
                s = [min(max(c - k // 2, 0), g - k) for c, k, g in zip((t, h, w), window, grid)]
                q = (t * grid[1] + h) * grid[2] + w
                for kt in range(s[0], s[0] + window[0]):
                    for kh in range(s[1], s[1] + window[1]):
                        for kw in range(s[2], s[2] + window[2]):
                            m[q, (kt * grid[1] + kh) * grid[2] + kw] = True
    return m
