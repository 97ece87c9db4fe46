"""Property-based fuzz test of tessera.block_sparse_attention on the CPU path (issue 21, item 2).

hypothesis draws shapes, layouts, strides, dtypes, block sizes, scales and masks in every format (dense bool/uint8,
MaskSpec, block-CSR, index lists, broadcast B_m/H_m), and then either leaves the request valid or breaks exactly
one thing (a mask extent, a column out of range, unsorted or repeated columns, a count past K_max, a bad block size,
dtype, stride, scale, ...). Each call must then either match the float64 reference (valid input: finite output, no
NaN) or raise TesseraError naming an argument (invalid input); anything else (another exception, a crash, NaN, a
wrong result, an invalid request accepted) fails. Runs in CI through CTest's python_cpu (about 150 examples).
"""
import math
import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (scripts/setup.sh installs it)")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tessera  # noqa: E402
from conftest import dense_to_csr, reference_attention, rel_l2  # noqa: E402

TOL = {np.float16: 2e-3, np.float32: 2e-5, np.float64: 1e-10}

# The ways an otherwise valid request is broken; None = valid. Each maps to the argument prefixes its error may name.
BREAKS = {
    None: (),
    "block_size_not_16": ("block_size", "geometry"),
    "block_size_too_big": ("block_size", "geometry"),
    "head_dim": ("q", "head_dim", "request"),  # 8, 33: valid for the reference, no kernel serves them
    "qkv_dtype": ("q",),
    "kv_dtype_mismatch": ("k", "v", "q"),
    "negative_stride": ("q",),
    "head_dim_strided": ("q",),
    "scale": ("scale",),
    "gqa_heads": ("k", "v", "q"),
    "mask_extent": ("block_mask", "mask"),
    "mask_dtype": ("block_mask", "mask"),
    "col_out_of_range": ("block_mask", "mask"),
    "col_negative": ("block_mask", "mask"),
    "cols_unsorted": ("block_mask", "mask"),
    "index_duplicate": ("block_mask", "mask"),
    "count_past_kmax": ("block_mask", "mask"),
    "count_negative": ("block_mask", "mask"),
    "row_offsets_length": ("block_mask", "mask"),
    "row_offsets_decreasing": ("block_mask", "mask"),
}
MASK_BREAKS = {
    "dense": ["mask_extent", "mask_dtype"],
    "spec": ["mask_extent"],
    "csr": ["mask_extent", "col_out_of_range", "col_negative", "cols_unsorted", "row_offsets_length",
            "row_offsets_decreasing"],
    "index_lists": ["mask_extent", "col_out_of_range", "col_negative", "index_duplicate", "count_past_kmax",
                    "count_negative"],
}
COMMON_BREAKS = ["block_size_not_16", "block_size_too_big", "head_dim", "qkv_dtype", "kv_dtype_mismatch",
                 "negative_stride", "head_dim_strided", "scale", "gqa_heads"]


@st.composite
def requests(draw):
    r = {}
    r["seed"] = draw(st.integers(0, 2**32 - 1))
    r["b"] = draw(st.integers(1, 2))
    r["h_kv"] = draw(st.integers(1, 2))
    r["h_q"] = r["h_kv"] * draw(st.sampled_from([1, 2]))
    r["d"] = draw(st.sampled_from([64, 128]))
    # 48 is a valid logical block size that only some keys are compiled for (others: TesseraUnsupportedError).
    r["bq"] = draw(st.sampled_from([16, 32, 64, 128, 16, 32, 64, 48]))
    r["bkv"] = draw(st.sampled_from([16, 32, 64, 128, 16, 32, 64, 48]))
    r["n_q"] = draw(st.integers(1, 150))
    r["n_kv"] = draw(st.integers(1, 150))
    r["dtype"] = draw(st.sampled_from([np.float16, np.float32, np.float64]))
    r["layout"] = draw(st.sampled_from(["bshd", "bhsd"]))
    r["strided"] = draw(st.booleans())
    r["fmt"] = draw(st.sampled_from(["dense", "dense_u8", "spec", "csr", "index_lists"]))
    r["bcast_b"] = draw(st.booleans())
    r["bcast_h"] = draw(st.booleans())
    r["density"] = draw(st.sampled_from([0.0, 0.2, 0.5, 1.0]))
    r["scale"] = draw(st.one_of(st.none(), st.floats(0.01, 2.0)))
    r["return_lse"] = draw(st.booleans())
    fmt_breaks = MASK_BREAKS["dense" if r["fmt"].startswith("dense") else r["fmt"]]
    r["break"] = draw(st.one_of(st.none(), st.none(), st.sampled_from(COMMON_BREAKS + fmt_breaks)))
    r["bad_scale"] = draw(st.sampled_from([0.0, -1.0, math.nan, math.inf, 1e5, True, "1"]))
    return r


def make_tensor(rng, shape, dtype, layout, strided, negative=False):
    """A [B, N, H, D] tensor (in `layout` order), optionally a strided view of a larger array."""
    b, n, h, d = shape
    full = (b, n, h, d) if layout == "bshd" else (b, h, n, d)
    if strided:
        big = rng.standard_normal((full[0], full[1] * 2, full[2] + 1, full[3])).astype(dtype)
        x = big[:, ::2, : full[2], :]
    else:
        x = rng.standard_normal(full).astype(dtype)
    if negative:  # reverse the sequence axis
        x = x[:, ::-1] if layout == "bshd" else x[:, :, ::-1]
    return x


def to_bshd(x, layout):
    return x if layout == "bshd" else np.transpose(x, (0, 2, 1, 3))


def build_mask(rng, r, dense, brk):
    """The mask input of format r['fmt'] for `dense` [B_m, H_m, n_qb, n_kvb], broken by `brk` when given."""
    fmt = r["fmt"]
    n_kvb = dense.shape[-1]
    if fmt in ("dense", "dense_u8", "spec"):
        m = dense if fmt != "dense_u8" else dense.astype(np.uint8) * np.uint8(rng.integers(1, 255))
        if brk == "mask_extent":
            m = np.concatenate([m, m[:, :, :1]], axis=2) if rng.random() < 0.5 else m[..., : n_kvb - 1]
        if brk == "mask_dtype":
            m = m.astype(np.float32)
        return tessera.from_dense(m) if fmt == "spec" else m
    if fmt == "csr":
        ro, ci = dense_to_csr(dense)
        shape = tuple(int(s) for s in dense.shape)
        if brk == "mask_extent":
            shape = (shape[0], shape[1], shape[2] + 1, shape[3])
        elif brk == "col_out_of_range":
            if len(ci) == 0:
                ro = ro.copy(); ro[1:] += 1; ci = np.array([n_kvb], np.int32)
            else:
                ci = ci.copy(); ci[rng.integers(len(ci))] = n_kvb + int(rng.integers(0, 3))
        elif brk == "col_negative":
            if len(ci) == 0:
                ro = ro.copy(); ro[1:] += 1; ci = np.array([-1], np.int32)
            else:
                ci = ci.copy(); ci[0] = -1 - int(rng.integers(0, 3))
        elif brk == "cols_unsorted":
            ro = ro.copy(); ro[1:] += 2
            ci = np.concatenate([[1, 0], ci]).astype(np.int32) if n_kvb >= 2 else np.concatenate([[0, 0], ci]).astype(np.int32)
        elif brk == "row_offsets_length":
            ro = ro[:-1] if rng.random() < 0.5 else np.concatenate([ro, ro[-1:]])
        elif brk == "row_offsets_decreasing":
            ro = ro.copy(); ro[-1] = -1
        return ("csr", ro, ci, shape)
    # index lists
    counts = dense.astype(bool).sum(axis=-1).astype(np.int32)
    k_max = int(counts.max(initial=0)) + int(rng.integers(0, 3))
    indices = rng.integers(-5, n_kvb + 5, size=dense.shape[:3] + (k_max,)).astype(np.int32)
    for idx in np.ndindex(*dense.shape[:3]):
        cols = np.nonzero(dense[idx])[0]
        indices[idx][: len(cols)] = rng.permutation(cols)
    nk = n_kvb
    if brk == "mask_extent":  # disagrees with ceil(N_kv / B_KV)
        nk = n_kvb + 1 if rng.random() < 0.5 else n_kvb - 1
    else:
        counts = counts.copy(); indices = np.ascontiguousarray(indices)
        row = tuple(int(rng.integers(s)) for s in counts.shape) if counts.size else None
        if row is not None and brk in ("col_out_of_range", "col_negative", "index_duplicate"):
            if indices.shape[-1] < 2:
                indices = np.concatenate([indices, np.zeros(indices.shape[:3] + (2,), np.int32)], axis=3)
            counts[row] = max(int(counts[row]), 2)
            indices[row][0] = n_kvb + 1 if brk == "col_out_of_range" else (-2 if brk == "col_negative" else 0)
            if brk == "index_duplicate":
                indices[row][1] = 0
        elif row is not None and brk == "count_past_kmax":
            counts[row] = indices.shape[-1] + 1
        elif row is not None and brk == "count_negative":
            counts[row] = -1
    return ("index_lists", counts, indices, nk)


# TESSERA_FUZZ_EXAMPLES raises the count for a long local run (CI: 150, about 10 s).
@settings(max_examples=int(os.environ.get("TESSERA_FUZZ_EXAMPLES", "150")), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(requests())
def test_cpu_call_matches_reference_or_names_argument(r):
    rng = np.random.default_rng(r["seed"])
    brk = r["break"]
    b, h_q, h_kv, d, n_q, n_kv = r["b"], r["h_q"], r["h_kv"], r["d"], r["n_q"], r["n_kv"]
    bq, bkv = r["bq"], r["bkv"]
    dtype = r["dtype"]
    if brk == "gqa_heads":
        h_q = h_kv * 2 + 1 if h_kv > 1 else 3
        h_kv = 2
    if brk == "head_dim":
        d = int(rng.choice([0, 8, 33, 1024]))
    if brk == "negative_stride":
        n_q = max(n_q, 2)  # a reversed extent-1 dimension has no stride that matters
    q = make_tensor(rng, (b, n_q, h_q, d), dtype, r["layout"], r["strided"], negative=brk == "negative_stride")
    k = make_tensor(rng, (b, n_kv, h_kv, d), dtype, r["layout"], r["strided"])
    v = make_tensor(rng, (b, n_kv, h_kv, d), dtype, r["layout"], r["strided"])
    if brk == "qkv_dtype":
        q, k, v = (x.astype(rng.choice([np.int32, np.complex64, np.uint8])) for x in (q, k, v))
    elif brk == "kv_dtype_mismatch":
        k = k.astype(np.float64 if dtype != np.float64 else np.float32)
    elif brk == "head_dim_strided" and d > 1:
        q = np.concatenate([q, q], axis=3)[..., ::2]
    n_qb, n_kvb = -(-n_q // bq), -(-n_kv // bkv)
    bm = 1 if r["bcast_b"] else b
    hm = 1 if r["bcast_h"] else h_q
    dense = rng.random((bm, hm, n_qb, n_kvb)) < r["density"]
    mask_brk = brk if brk in MASK_BREAKS["csr"] + MASK_BREAKS["index_lists"] + ["mask_dtype"] else None
    block_mask = build_mask(rng, r, dense, mask_brk)
    block_size = (bq, bkv) if bq != bkv or rng.random() < 0.5 else bq
    if brk == "block_size_not_16":
        block_size = (bq + 8, bkv)
    elif brk == "block_size_too_big":
        block_size = (bq, 2048)
    scale = r["bad_scale"] if brk == "scale" else r["scale"]
    invalid = brk is not None  # every break applies (N_q, N_kv >= 1: every mask has a row and a column)
    event(f"fmt={r['fmt']} break={brk}")  # pytest --hypothesis-show-statistics

    try:
        out = tessera.block_sparse_attention(q, k, v, block_mask, block_size, scale=scale, layout=r["layout"],
                                             return_lse=r["return_lse"])
    except tessera.TesseraError as e:
        assert isinstance(e.argument, str) and e.argument, f"TesseraError without an argument: {e!r}"
        if isinstance(e, tessera.TesseraUnsupportedError) and e.argument == "request" and 48 in (bq, bkv):
            event("valid, unsupported geometry")
            return  # valid, but no compiled kernel serves this geometry (documented; `tessera inspect catalog`)
        assert invalid, f"valid request rejected ({r}): {e!r}"
        prefixes = BREAKS[brk]
        assert any(e.argument.startswith(p) for p in prefixes), \
            f"break {brk} raised an error naming {e.argument!r}, expected one of {prefixes}: {e}"
        return
    assert not invalid, f"invalid request ({brk}) accepted: {r}"
    o, lse = out if r["return_lse"] else (out, None)
    assert o.shape == q.shape and o.dtype == q.dtype
    assert not np.isnan(o).any(), "NaN in the output of a valid request"
    o_ref, lse_ref = reference_attention(to_bshd(q, r["layout"]), to_bshd(k, r["layout"]), to_bshd(v, r["layout"]),
                                         dense, bq, bkv, scale)
    err = rel_l2(to_bshd(o, r["layout"]), o_ref) if np.linalg.norm(o_ref) > 0 else float(np.abs(o).max(initial=0))
    assert err < TOL[dtype], f"relative L2 error {err} for {r}"
    if lse is not None:
        assert lse.shape == (b, h_q, n_q) and lse.dtype == np.float32
        fin = np.isfinite(lse_ref)
        assert np.array_equal(np.isfinite(lse), fin)
        np.testing.assert_allclose(lse[fin], lse_ref[fin], rtol=1e-5, atol=1e-5)
