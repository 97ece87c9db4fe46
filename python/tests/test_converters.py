"""Mask converters (FlashInfer BSR, FlexAttention BlockMask via a duck-typed stand-in) and mask-input parsing, on
numpy inputs (no torch needed), checked against masks built independently in the test and through attention."""
from types import SimpleNamespace

import numpy as np
import pytest

import tessera
from tessera.converters import to_mask_spec
from conftest import dense_to_csr, random_mask, reference_attention, rel_l2


def spec_to_dense(spec, n_kvb):
    """Expands a MaskSpec (csr or index_lists) to a dense bool mask, independently of the C++ code."""
    b, h, nq, nk = spec.extents
    nk = nk or n_kvb
    out = np.zeros((b, h, nq, nk), dtype=bool)
    if spec.kind == "csr":
        ro, ci = np.asarray(spec.m0), np.asarray(spec.m1)
        for r in range(b * h * nq):
            cols = ci[ro[r]:ro[r + 1]]
            assert np.all(np.diff(cols) > 0), "columns must be strictly increasing within a row"
            out.reshape(-1, nk)[r, cols] = True
    elif spec.kind == "index_lists":
        counts, idx = np.asarray(spec.m0), np.asarray(spec.m1)
        for i in np.ndindex(b, h, nq):
            cols = idx[i][: counts[i]]
            assert len(set(cols.tolist())) == len(cols), "duplicate blocks in a row"
            out[i][cols] = True
    else:
        out[...] = np.asarray(spec.m0).astype(bool)
    return out


def qkv(rng, n_q, n_kv, h=2, d=128):
    return (rng.standard_normal((1, n_q, h, d)).astype(np.float32),
            rng.standard_normal((1, n_kv, h, d)).astype(np.float32),
            rng.standard_normal((1, n_kv, h, d)).astype(np.float32))


# ---------------------------------------------------------------------------------------------- FlashInfer BSR

def test_flashinfer_bsr_shared_pattern_unsorted_rows(rng):
    # MB = 3 block rows of R = 32 tokens, C = 16: hand-made, columns unsorted within rows, one empty row
    indptr = np.array([0, 3, 3, 5])
    indices = np.array([4, 0, 2, 1, 3])
    spec = tessera.from_flashinfer_bsr(indptr, indices, 32, 16)
    assert spec.kind == "csr" and spec.block_size == (32, 16) and spec.extents == (1, 1, 3, None)
    assert spec.m0.dtype == np.int32 and spec.m1.dtype == np.int32
    expect = np.zeros((1, 1, 3, 5), bool)
    expect[0, 0, 0, [0, 2, 4]] = True
    expect[0, 0, 2, [1, 3]] = True
    assert np.array_equal(spec_to_dense(spec, 5), expect)
    q, k, v = qkv(rng, 90, 80)  # M = 90 (partial last block row), N = 80 = 5 * C
    o = tessera.block_sparse_attention(q, k, v, spec)  # block_size comes from (R, C)
    o_ref, _ = reference_attention(q, k, v, expect, 32, 16)
    assert rel_l2(o, o_ref) < 1e-5


def test_flashinfer_bsr_per_head(rng):
    dense = random_mask(rng, (1, 2, 2, 4), density=0.5)
    ro, ci = dense_to_csr(dense)
    spec = tessera.from_flashinfer_bsr(ro.astype(np.int64), ci.astype(np.int64), 64, 32, num_heads=2,
                                       num_kv_blocks=4)
    assert spec.extents == (1, 2, 2, 4)
    assert np.array_equal(spec_to_dense(spec, 4), dense)
    q, k, v = qkv(rng, 128, 128)
    o = tessera.block_sparse_attention(q, k, v, spec, (64, 32))
    o_ref, _ = reference_attention(q, k, v, dense, 64, 32)
    assert rel_l2(o, o_ref) < 1e-5


def test_flashinfer_bsr_errors():
    f = tessera.from_flashinfer_bsr
    ok_ptr, ok_idx = np.array([0, 1, 2]), np.array([0, 1])
    cases = [
        (lambda: f(np.array([0, 1, 3]), ok_idx, 16, 16), "indptr"),           # indptr[-1] != nnz
        (lambda: f(np.array([1, 1, 2]), ok_idx, 16, 16), "indptr"),           # indptr[0] != 0
        (lambda: f(np.array([0, 2, 1, 2]), ok_idx, 16, 16), "indptr"),        # decreasing
        (lambda: f(np.array([[0, 1, 2]]), ok_idx, 16, 16), "indptr"),         # rank 2
        (lambda: f(ok_ptr, ok_idx.astype(np.float32), 16, 16), "indices"),    # float indices
        (lambda: f(ok_ptr, ok_idx, 0, 16), "R"),
        (lambda: f(ok_ptr, ok_idx, 16, -1), "C"),
        (lambda: f(ok_ptr, ok_idx, 16, 16, num_heads=3), "num_heads"),        # 2 rows, 3 heads
        (lambda: f(ok_ptr, np.array([0, 2**40]), 16, 16), "indices"),         # does not fit in int32
        (lambda: f(ok_ptr, ok_idx, 15, 16), "R"),                              # not a multiple of 16
        (lambda: f(ok_ptr, ok_idx, 16, 2048), "C"),                            # above 1024
        (lambda: tessera.from_dense(np.ones((1, 1, 2, 2), bool), block_size=15), "block_size"),
        (lambda: tessera.from_dense(np.ones((1, 1, 2, 2), bool), block_size=(48, 8)), "block_size"),
    ]
    for fn, arg in cases:
        with pytest.raises(tessera.TesseraError) as e:
            fn()
        assert e.value.argument == arg, (arg, str(e.value))


def test_flashinfer_bsr_duplicate_column_is_rejected_at_the_call(rng):
    spec = tessera.from_flashinfer_bsr(np.array([0, 2, 3]), np.array([1, 1, 0]), 64, 64)
    q, k, v = qkv(rng, 128, 128)
    with pytest.raises(tessera.TesseraError) as e:
        tessera.block_sparse_attention(q, k, v, spec)
    assert e.value.argument == "mask.col_indices"


# ---------------------------------------------------------------------------------------- FlexAttention BlockMask

def noop_mask(b, h, q_idx, kv_idx):  # the name FlexAttention's own no-op mask_mod has
    return True


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def flex_stand_in(dense, bs, rng, full_fraction=0.5, mask_mod=None, seq_lengths=None, full=True):
    """A duck-typed FlexAttention BlockMask: active blocks split at random into partial (kv_*) and full
    (full_kv_*) lists, rows padded with garbage past the counts as FlexAttention allows."""
    b, h, nq, nk = dense.shape
    is_full = rng.random(dense.shape) < full_fraction if full else np.zeros(dense.shape, bool)
    part, fullm = dense & ~is_full, dense & is_full

    def lists(m):
        counts = m.sum(-1).astype(np.int32)
        idx = rng.integers(0, nk, size=(b, h, nq, nk)).astype(np.int32)
        for i in np.ndindex(b, h, nq):
            cols = np.nonzero(m[i])[0]
            idx[i][: len(cols)] = rng.permutation(cols)
        return counts, idx

    c1, i1 = lists(part)
    c2, i2 = lists(fullm) if full else (None, None)
    return SimpleNamespace(kv_num_blocks=c1, kv_indices=i1, full_kv_num_blocks=c2, full_kv_indices=i2,
                           BLOCK_SIZE=(bs, bs) if isinstance(bs, int) else bs, mask_mod=mask_mod,
                           seq_lengths=seq_lengths)


@pytest.mark.parametrize("full", [True, False])
def test_flex_block_mask_merges_partial_and_full(full, rng):
    dense = random_mask(rng, (1, 2, 3, 3), density=0.6)
    dense[0, 1, 0] = False
    bm = flex_stand_in(dense, 64, rng, mask_mod=noop_mask, seq_lengths=(150, 140), full=full)
    spec = tessera.from_flex_block_mask(bm)
    assert spec.kind == "index_lists" and spec.block_size == (64, 64) and spec.extents == (1, 2, 3, 3)
    assert np.array_equal(spec_to_dense(spec, 3), dense)
    q, k, v = qkv(rng, 150, 140)
    o, lse = tessera.block_sparse_attention(q, k, v, bm, return_lse=True)  # a BlockMask directly, no block_size
    o_ref, lse_ref = reference_attention(q, k, v, dense, 64, 64)
    assert rel_l2(o, o_ref) < 1e-5
    assert np.array_equal(np.isneginf(lse), np.isneginf(lse_ref))


def test_flex_block_mask_rectangular_block_size(rng):
    dense = random_mask(rng, (1, 1, 2, 4), density=0.6)
    bm = flex_stand_in(dense, (64, 32), rng, seq_lengths=(128, 128))
    q, k, v = qkv(rng, 128, 128, h=1)
    o = tessera.block_sparse_attention(q, k, v, bm, (64, 32))
    o_ref, _ = reference_attention(q, k, v, dense, 64, 32)
    assert rel_l2(o, o_ref) < 1e-5


def test_flex_mask_mod_with_partial_blocks(rng):
    dense = np.tril(np.ones((2, 2), bool))[None, None]
    bm = flex_stand_in(dense, 64, rng, full_fraction=0.0, mask_mod=causal, seq_lengths=(128, 128))
    with pytest.raises(tessera.TesseraError) as e:
        tessera.from_flex_block_mask(bm)
    assert e.value.argument == "block_mask.mask_mod"
    q, k, v = qkv(rng, 128, 128, h=1)
    with pytest.raises(tessera.TesseraError):
        tessera.block_sparse_attention(q, k, v, bm)
    spec = tessera.from_flex_block_mask(bm, partial_blocks="active")  # block-level semantics, explicitly
    o = tessera.block_sparse_attention(q, k, v, spec)
    o_ref, _ = reference_attention(q, k, v, dense, 64, 64)
    assert rel_l2(o, o_ref) < 1e-5
    # a non-noop mask_mod whose blocks are all full is exact and accepted
    bm_full = flex_stand_in(dense, 64, rng, full_fraction=1.0, mask_mod=causal, seq_lengths=(128, 128))
    assert np.array_equal(spec_to_dense(tessera.from_flex_block_mask(bm_full), 2), dense)


def test_flex_errors(rng):
    dense = random_mask(rng, (1, 1, 2, 2))
    bm = flex_stand_in(dense, 64, rng, seq_lengths=(128, 128))
    q, k, v = qkv(rng, 128, 128, h=1)
    with pytest.raises(tessera.TesseraError) as e:  # mask built for other lengths
        tessera.block_sparse_attention(q[:, :100], k, v, bm)
    assert e.value.argument == "block_mask"
    with pytest.raises(tessera.TesseraError) as e:  # block_size disagrees with BLOCK_SIZE
        tessera.block_sparse_attention(q, k, v, bm, 32)
    assert e.value.argument == "block_size"
    half = SimpleNamespace(**{**vars(bm), "full_kv_indices": None})
    with pytest.raises(tessera.TesseraError) as e:
        tessera.from_flex_block_mask(half)
    assert e.value.argument == "block_mask.full_kv_indices"
    with pytest.raises(tessera.TesseraError) as e:
        tessera.from_flex_block_mask(SimpleNamespace(kv_num_blocks=bm.kv_num_blocks, kv_indices=bm.kv_indices))
    assert e.value.argument == "block_mask"
    bad = SimpleNamespace(**{**vars(bm), "kv_indices": bm.kv_indices[0]})
    with pytest.raises(tessera.TesseraError) as e:
        tessera.from_flex_block_mask(bad)
    assert e.value.argument == "block_mask.kv_indices"
    with pytest.raises(tessera.TesseraError) as e:
        tessera.from_flex_block_mask(bm, partial_blocks="drop")
    assert e.value.argument == "partial_blocks"


# ------------------------------------------------------------------------------------------------ mask parsing

def test_to_mask_spec_inputs(rng):
    dense = random_mask(rng, (1, 2, 3, 4))
    assert to_mask_spec(dense).kind == "dense"
    assert to_mask_spec(("dense", dense)).extents == (1, 2, 3, 4)
    ro, ci = dense_to_csr(dense)
    s = to_mask_spec(("csr", ro, ci, (1, 2, 3, 4)))
    assert s.kind == "csr" and np.array_equal(spec_to_dense(s, 4), dense)
    counts = dense.sum(-1).astype(np.int32)
    idx = np.zeros((1, 2, 3, 4), np.int64)
    for i in np.ndindex(1, 2, 3):
        idx[i][: counts[i]] = np.nonzero(dense[i])[0]
    s = to_mask_spec(("index_lists", counts, idx, 4))
    assert s.kind == "index_lists" and s.m1.dtype == np.int32 and np.array_equal(spec_to_dense(s, 4), dense)
    assert to_mask_spec(s) is s
    for bad, arg in [(("coo", dense), "block_mask"), (("csr", ro, ci), "block_mask"),
                     (("index_lists", counts, idx[0], 4), "block_mask.indices"),
                     (("index_lists", counts[0], idx, 4), "block_mask.counts"),
                     (("index_lists", counts, idx, 0), "block_mask.n_kvb"),
                     (("csr", ro, ci, (1, 2, 3, -4)), "block_mask.extents"), (3.0, "block_mask")]:
        with pytest.raises(tessera.TesseraError) as e:
            to_mask_spec(bad)
        assert e.value.argument == arg, (arg, str(e.value))


def test_error_classes():
    assert issubclass(tessera.TesseraError, ValueError)
    assert issubclass(tessera.TesseraUnsupportedError, NotImplementedError)
    assert issubclass(tessera.TesseraUnsupportedError, tessera.TesseraError)
    assert issubclass(tessera.TesseraRuntimeError, RuntimeError)
    e = tessera.TesseraError("q", "bad")
    assert e.argument == "q" and e.message == "bad" and "q: bad" in str(e)


def _torch_flex():
    torch = pytest.importorskip("torch", reason="torch is not installed (CI runs the numpy tests only)")
    fa = pytest.importorskip("torch.nn.attention.flex_attention", reason="this torch has no FlexAttention")
    return torch, fa


def test_real_flex_block_mask_cpu(rng):
    """A real BlockMask (from_kv_blocks, GQA) and compiled flex_attention on CPU tensors. Eager flex_attention is not
    used: it ignores the block lists (measured with torch 2.15: equal to dense SDPA for a noop mask_mod)."""
    torch, fa = _torch_flex()
    n, bs, h_q, h_kv = 256, 64, 4, 2
    q = torch.from_numpy(rng.standard_normal((1, h_q, n, 128)).astype(np.float32))
    k, v = (torch.from_numpy(rng.standard_normal((1, h_kv, n, 128)).astype(np.float32)) for _ in range(2))
    dense = random_mask(rng, (1, h_q, 4, 4), density=0.4)
    dense[..., np.arange(4), np.arange(4)] = True
    bm = flex_stand_in(dense, bs, rng, full=False)
    block_mask = fa.BlockMask.from_kv_blocks(torch.from_numpy(bm.kv_num_blocks), torch.from_numpy(bm.kv_indices),
                                             BLOCK_SIZE=bs)
    o = tessera.block_sparse_attention(q, k, v, block_mask, layout="bhsd")
    o_flex = torch.compile(fa.flex_attention)(q, k, v, block_mask=block_mask, enable_gqa=True)
    o_ref, _ = reference_attention(q.transpose(1, 2).numpy(), k.transpose(1, 2).numpy(), v.transpose(1, 2).numpy(),
                                   dense, bs, bs)
    assert rel_l2(o.transpose(1, 2).numpy(), o_ref) < 1e-5
    assert rel_l2(o.numpy(), o_flex.numpy()) < 1e-4


def test_real_flex_create_block_mask_ragged_cpu(rng):
    torch, fa = _torch_flex()
    n, bs = 250, 64  # the last block is partial in FlexAttention's terms
    blocks = torch.from_numpy(random_mask(rng, (4, 4), density=0.5) | np.eye(4, dtype=bool))

    def block_mod(b, h, q_idx, kv_idx):
        return blocks[q_idx // bs, kv_idx // bs]

    block_mask = fa.create_block_mask(block_mod, 1, 1, n, n, device="cpu", BLOCK_SIZE=bs)
    q, k, v = (torch.from_numpy(rng.standard_normal((1, 2, n, 128)).astype(np.float32)) for _ in range(3))
    with pytest.raises(tessera.TesseraError) as e:
        tessera.block_sparse_attention(q, k, v, block_mask, layout="bhsd")
    assert e.value.argument == "block_mask.mask_mod"
    spec = tessera.from_flex_block_mask(block_mask, partial_blocks="active")
    assert spec.seq_lengths == (n, n) and spec.extents == (1, 1, 4, 4)
    o = tessera.block_sparse_attention(q, k, v, spec, layout="bhsd")
    o_flex = torch.compile(fa.flex_attention)(q, k, v, block_mask=block_mask)
    assert rel_l2(o.numpy(), o_flex.numpy()) < 1e-4
    with pytest.raises(tessera.TesseraError) as e:  # a mask built for 250 tokens, used with 256
        tessera.block_sparse_attention(*(torch.nn.functional.pad(x, (0, 0, 0, 6)) for x in (q, k, v)), spec,
                                       layout="bhsd")
    assert e.value.argument == "block_mask"
