"""Test oracle shared by the Python tests (test_model_loop.py, test_peers.py): FlexAttention's Triton forward kernel
on a BlockMask, emulated on the CPU in float64 as its templates read the lists (needs torch)."""


def flex_triton_emulation(q, k, v, bm, block_n=128, past_end=float("nan")):
    """What FlexAttention's Triton forward kernel computes for a BlockMask, as its templates read: per query
    block, its partial list then its full list; every listed block walked in block_n-token tiles, at most
    cdiv(KV_LEN, block_n) tiles per list; the mask_mod applied in partial blocks only; bounds checks (keys past
    KV_LEN masked, their loads zero-filled) only when IS_DIVISIBLE is false, which the lowering before
    can_skip_boundary_checks sets from Q_LEN % 128 == 0 and KV_LEN % 128 == 0 alone (2.15 also asks for a multiple
    of the BlockMask's block; the GPU run's 2.11 behaved as the former). Past the
    end of k and v, with the checks skipped, the kernel reads whatever memory follows: `past_end` here. q, k, v
    [1, H, L, D]; returns [1, H, L, D] float64 (zero rows where a query block lists no block). block_n: the kernel's
    BLOCK_N (kernel_options; 128 by default at blocks of 128 and above). A CPU stand-in for the GPU kernel, not the
    kernel."""
    import torch

    _, h, n, d = q.shape
    bq, bkv = bm.BLOCK_SIZE
    mult, cap = bkv // block_n, -(-n // block_n)
    divisible = n % 128 == 0
    lx = max(n, bm.kv_indices.shape[-1] * bkv)
    kx = torch.full((h, lx, d), 0.0 if not divisible else past_end, dtype=torch.float64)
    vx = kx.clone()
    kx[:, :n], vx[:, :n] = k[0].double(), v[0].double()
    lists = [(bm.kv_num_blocks, bm.kv_indices, True)]
    if bm.full_kv_num_blocks is not None:
        lists.append((bm.full_kv_num_blocks, bm.full_kv_indices, False))
    out = torch.zeros(h, n, d, dtype=torch.float64)
    for hh in range(h):
        for qb in range(-(-n // bq)):
            rows = torch.arange(qb * bq, min((qb + 1) * bq, n))
            cols, keep = [], []
            for num, ind, partial in lists:
                for t in range(min(int(num[0, hh, qb]) * mult, cap)):
                    c = int(ind[0, hh, qb, t // mult]) * bkv + (t % mult) * block_n + torch.arange(block_n)
                    ok = torch.ones(len(rows), block_n, dtype=torch.bool)
                    if partial:
                        ok &= bm.mask_mod(torch.tensor(0), torch.tensor(hh), rows[:, None], c[None, :])
                    if not divisible:
                        ok &= c[None, :] < n
                    cols.append(c)
                    keep.append(ok)
            if not cols:  # no listed block: the kernel writes zeros
                continue
            c, ok = torch.cat(cols), torch.cat(keep, 1)
            s = (q[0, hh, rows].double() @ kx[hh, c].T) / d ** 0.5
            s = torch.where(ok, s, torch.tensor(float("-inf"), dtype=torch.float64))
            out[hh, rows] = torch.softmax(s, -1) @ vx[hh, c]
    return out.unsqueeze(0)
