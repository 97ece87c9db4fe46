"""Shared helpers of the Python tests: a numpy float64 reference of E(M) and mask-format conversions written
independently of the package (so the converters are checked against something else)."""
import zlib

import numpy as np
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "multiprocess: spawns torch.distributed (gloo) process groups "
                                       "(test_distributed_cpu.py; deselect with -m 'not multiprocess')")


def reference_attention(q, k, v, dense, bq, bkv, scale=None):
    """E(M) in float64. q [B, N_q, H_q, D], k/v [B, N_kv, H_kv, D], dense [B_m, H_m, n_qb, n_kvb] (broadcast).
    Returns O [B, N_q, H_q, D] and LSE [B, H_q, N_q] (-inf and O = 0 for query tokens with no active block)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    b, n_q, h_q, d = q.shape
    n_kv, h_kv = k.shape[1], k.shape[2]
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    g = h_q // h_kv
    m = np.broadcast_to(dense.astype(bool), (b, h_q) + dense.shape[2:])
    tok = m[:, :, np.arange(n_q) // bq][:, :, :, np.arange(n_kv) // bkv]  # [B, H, N_q, N_kv]
    kk = np.repeat(k, g, axis=2)
    vv = np.repeat(v, g, axis=2)
    s = np.einsum("bihd,bjhd->bhij", q, kk) * scale
    s = np.where(tok, s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    safe = np.where(np.isfinite(mx), mx, 0.0)
    p = np.where(tok, np.exp(s - safe), 0.0)
    l = p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bjhd->bihd", p / np.where(l > 0, l, 1.0), vv)
    with np.errstate(divide="ignore"):
        lse = np.where(l[..., 0] > 0, safe[..., 0] + np.log(np.where(l[..., 0] > 0, l[..., 0], 1.0)), -np.inf)
    return o, lse


def dense_to_csr(dense):
    """[B_m, H_m, n_qb, n_kvb] -> (row_offsets int32, col_indices int32), rows in C order."""
    flat = dense.reshape(-1, dense.shape[-1]).astype(bool)
    counts = flat.sum(axis=1)
    row_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    col_indices = np.nonzero(flat)[1].astype(np.int32)
    return row_offsets, col_indices


def dense_to_index_lists(dense, rng, k_extra=2):
    """Index lists with rows in random order and garbage past each row's count (must be ignored)."""
    bm, hm, nqb, nkvb = dense.shape
    counts = dense.astype(bool).sum(axis=-1).astype(np.int32)
    k_max = int(counts.max()) + k_extra
    indices = rng.integers(-5, nkvb + 5, size=(bm, hm, nqb, k_max)).astype(np.int32)
    for idx in np.ndindex(bm, hm, nqb):
        cols = np.nonzero(dense[idx])[0]
        indices[idx][: len(cols)] = rng.permutation(cols)
    return counts, indices


def random_mask(rng, shape, density=0.4, empty_rows=()):
    m = rng.random(shape) < density
    for r in empty_rows:
        m[r] = False
    return m


def rel_l2(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))
