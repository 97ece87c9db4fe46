"""tessera.block_sparse_attention on the CPU (numpy; torch CPU where installed) against a float64 reference."""
import math

import numpy as np
import pytest

import tessera
from conftest import dense_to_csr, dense_to_index_lists, random_mask, reference_attention, rel_l2

try:
    import torch
except ImportError:  # torch is not installed on CI (too big); torch CPU tests skip there
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (CI runs the numpy tests only)")


def qkv(rng, b, n_q, n_kv, h_q, h_kv, d, dtype=np.float32):
    q = rng.standard_normal((b, n_q, h_q, d)).astype(dtype)
    k = rng.standard_normal((b, n_kv, h_kv, d)).astype(dtype)
    v = rng.standard_normal((b, n_kv, h_kv, d)).astype(dtype)
    return q, k, v


def mask_in(fmt, dense, rng):
    if fmt == "dense":
        return dense
    if fmt == "dense_u8":
        return dense.astype(np.uint8)
    if fmt == "csr":
        ro, ci = dense_to_csr(dense)
        return ("csr", ro, ci, dense.shape)
    counts, indices = dense_to_index_lists(dense, rng)
    return ("index_lists", counts, indices, dense.shape[-1])


@pytest.mark.parametrize("fmt", ["dense", "dense_u8", "csr", "index_lists"])
def test_formats_match_reference(fmt, rng):
    b, n, h, d, bs = 2, 96, 2, 128, 16
    q, k, v = qkv(rng, b, n, n, h, h, d)
    dense = random_mask(rng, (b, h, n // bs, n // bs), empty_rows=[(0, 1, 2)])
    o, lse = tessera.block_sparse_attention(q, k, v, mask_in(fmt, dense, rng), bs, return_lse=True)
    o_ref, lse_ref = reference_attention(q, k, v, dense, bs, bs)
    assert o.shape == q.shape and o.dtype == np.float32
    assert lse.shape == (b, h, n) and lse.dtype == np.float32
    assert rel_l2(o, o_ref) < 1e-5
    fin = np.isfinite(lse_ref)
    assert np.array_equal(np.isfinite(lse), fin)
    np.testing.assert_allclose(lse[fin], lse_ref[fin], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("h_q,h_kv", [(4, 2), (4, 1), (6, 3)])
def test_gqa_and_per_head_mask(h_q, h_kv, rng):
    q, k, v = qkv(rng, 1, 64, 80, h_q, h_kv, 128)
    dense = random_mask(rng, (1, h_q, 4, 5), density=0.5)
    o = tessera.block_sparse_attention(q, k, v, dense, 16)
    o_ref, _ = reference_attention(q, k, v, dense, 16, 16)
    assert rel_l2(o, o_ref) < 1e-5


def test_rectangular_geometry_and_ragged_lengths(rng):
    # N_q = 100 with B_Q = 32 (last block 4 tokens), N_kv = 77 with B_KV = 16 (last block 13 tokens)
    q, k, v = qkv(rng, 1, 100, 77, 2, 2, 128)
    dense = random_mask(rng, (1, 2, 4, 5), density=0.6)
    o, lse = tessera.block_sparse_attention(q, k, v, dense, (32, 16), return_lse=True)
    o_ref, lse_ref = reference_attention(q, k, v, dense, 32, 16)
    assert rel_l2(o, o_ref) < 1e-5
    fin = np.isfinite(lse_ref)
    np.testing.assert_allclose(lse[fin], lse_ref[fin], rtol=1e-5, atol=1e-5)


def test_broadcast_mask_batch_and_heads(rng):
    q, k, v = qkv(rng, 2, 64, 64, 3, 3, 128)
    dense = random_mask(rng, (1, 1, 4, 4), density=0.5)
    o = tessera.block_sparse_attention(q, k, v, dense, 16)
    o_ref, _ = reference_attention(q, k, v, dense, 16, 16)
    assert rel_l2(o, o_ref) < 1e-5


def test_empty_rows_give_zero_and_minus_inf(rng):
    q, k, v = qkv(rng, 1, 64, 64, 2, 2, 128)
    dense = random_mask(rng, (1, 2, 4, 4), density=0.7)
    dense[0, 0, 1] = False
    dense[0, 1, :] = False  # a whole head without any active block
    ro, ci = dense_to_csr(dense)
    o, lse = tessera.block_sparse_attention(q, k, v, ("csr", ro, ci, dense.shape), 16, return_lse=True)
    assert np.all(o[0, 16:32, 0] == 0) and np.all(o[0, :, 1] == 0)
    assert np.all(np.isneginf(lse[0, 0, 16:32])) and np.all(np.isneginf(lse[0, 1]))
    assert not np.any(np.isnan(o))
    o_ref, _ = reference_attention(q, k, v, dense, 16, 16)
    assert rel_l2(o, o_ref) < 1e-5


def test_all_empty_mask_csr_with_no_entries(rng):
    q, k, v = qkv(rng, 1, 32, 32, 1, 1, 128)
    ro = np.zeros(3, dtype=np.int32)
    ci = np.zeros(0, dtype=np.int32)
    o, lse = tessera.block_sparse_attention(q, k, v, ("csr", ro, ci, (1, 1, 2, 2)), 16, return_lse=True)
    assert np.all(o == 0) and np.all(np.isneginf(lse))


def test_bhsd_layout_and_strided_inputs(rng):
    b, n, h, d = 1, 64, 2, 128
    q, k, v = qkv(rng, b, n, n, h, h, d)
    dense = random_mask(rng, (b, h, 4, 4), density=0.5)
    o_bshd = tessera.block_sparse_attention(q, k, v, dense, 16)
    qt, kt, vt = (np.ascontiguousarray(np.swapaxes(x, 1, 2)) for x in (q, k, v))  # [B, H, N, D]
    o_bhsd, lse = tessera.block_sparse_attention(qt, kt, vt, dense, 16, layout="bhsd", return_lse=True)
    assert o_bhsd.shape == (b, h, n, d) and lse.shape == (b, h, n)
    np.testing.assert_allclose(np.swapaxes(o_bhsd, 1, 2), o_bshd, rtol=1e-6, atol=1e-6)
    # a q that is a strided slice of a bigger buffer (heads 0 and 2 of 4)
    big = rng.standard_normal((b, n, 4, d)).astype(np.float32)
    qs = big[:, :, ::2]
    o_s = tessera.block_sparse_attention(qs, k, v, dense, 16)
    o_ref, _ = reference_attention(qs, k, v, dense, 16, 16)
    assert rel_l2(o_s, o_ref) < 1e-5


# float64: the CPU path is float64 throughout, the default scale 1/sqrt(128) included (not a float32 value)
@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (np.float64, 1e-12)])
def test_dtypes(dtype, tol, rng):
    # the CPU path selects like the GPU: f16 requests need an f16 kernel key (d128 with 64-token blocks exists)
    q, k, v = qkv(rng, 1, 150, 130, 2, 2, 128, dtype)
    dense = random_mask(rng, (1, 2, 3, 3), density=0.6)
    o = tessera.block_sparse_attention(q, k, v, dense, 64)
    assert o.dtype == dtype
    o_ref, _ = reference_attention(q, k, v, dense, 64, 64)
    assert rel_l2(o, o_ref) < tol


def test_scale(rng):
    q, k, v = qkv(rng, 1, 32, 32, 1, 1, 128)
    dense = np.ones((1, 1, 2, 2), dtype=bool)
    o = tessera.block_sparse_attention(q, k, v, dense, 16, scale=0.3)
    o_ref, _ = reference_attention(q, k, v, dense, 16, 16, scale=0.3)
    assert rel_l2(o, o_ref) < 1e-5
    o_default_ref, _ = reference_attention(q, k, v, dense, 16, 16)
    assert rel_l2(o, o_default_ref) > 1e-3  # the scale is actually used


def test_int64_index_arrays_are_accepted(rng):
    q, k, v = qkv(rng, 1, 32, 32, 1, 1, 128)
    dense = np.array([[[[1, 0], [1, 1]]]], dtype=bool)
    ro, ci = dense_to_csr(dense)
    o = tessera.block_sparse_attention(q, k, v, ("csr", ro.astype(np.int64), ci.astype(np.int64), (1, 1, 2, 2)), 16)
    o_ref, _ = reference_attention(q, k, v, dense, 16, 16)
    assert rel_l2(o, o_ref) < 1e-5


def test_explain_and_last_dispatch(rng):
    q, k, v = qkv(rng, 1, 128, 128, 2, 2, 64)
    dense = random_mask(rng, (1, 2, 2, 2), density=0.5)
    dense[0, 0, 0, :] = True
    info = tessera.explain(q, k, v, dense, 64)
    for key in ("plan_id", "regime", "source", "density", "run_coverage", "mean_run_length", "active_blocks",
                "empty_rows", "mask_shape", "host_dispatch_us"):
        assert key in info, key
    assert isinstance(info["plan_id"], str) and info["plan_id"]
    assert info["source"] in ("table", "base", "default", "forced")
    assert info["device"] == "cpu"
    assert info["mask_shape"] == (1, 2, 2, 2)
    assert info["active_blocks"] == int(dense.sum())
    assert math.isclose(info["density"], dense.mean())
    row_active = dense.sum(axis=-1)  # active kv blocks of each mask row (batch, head, query block)
    assert info["max_row_active"] == int(row_active.max())
    assert math.isclose(info["mean_row_active"], row_active.mean())
    assert math.isclose(info["row_imbalance"], row_active.max() / row_active.mean())  # the seventh feature
    # coarsen_cost2: pairs computed when the two query blocks of each head share a CTA (their union, twice) / active
    union = dense[0, :, 0, :] | dense[0, :, 1, :]  # [heads, n_kvb]
    assert math.isclose(info["coarsen_cost2"], 2 * int(union.sum()) / int(dense.sum()))
    assert info["coarsen_cost4"] == 1.0 and info["coarsen_cost8"] == 1.0  # two query blocks: no larger group differs
    assert tessera.last_dispatch()["plan_id"] == info["plan_id"]


def test_forced_plan_id(rng):
    q, k, v = qkv(rng, 1, 128, 128, 1, 1, 64)
    dense = random_mask(rng, (1, 1, 2, 2), density=0.75)
    chosen = tessera.explain(q, k, v, dense, 64)["plan_id"]
    o = tessera.block_sparse_attention(q, k, v, dense, 64, plan_id=chosen)
    assert tessera.last_dispatch()["source"] == "forced"
    o_ref, _ = reference_attention(q, k, v, dense, 64, 64)
    assert rel_l2(o, o_ref) < 1e-5
    with pytest.raises(tessera.TesseraError) as e:
        tessera.block_sparse_attention(q, k, v, dense, 64, plan_id="not-a-plan")
    assert e.value.argument == "plan_id"


# ------------------------------------------------------------------------------------------ argument errors

def _err(fn, *args, **kwargs):
    with pytest.raises(tessera.TesseraError) as e:
        fn(*args, **kwargs)
    assert isinstance(e.value, ValueError)
    return e.value


def test_errors_name_the_argument(rng):
    bsa = tessera.block_sparse_attention
    q, k, v = qkv(rng, 1, 64, 64, 2, 2, 128)
    dense = random_mask(rng, (1, 2, 4, 4))
    assert _err(bsa, q, k, v, dense, 16, layout="sbhd").argument == "layout"
    assert _err(bsa, q[0], k, v, dense, 16).argument == "q"
    assert _err(bsa, q, k[:, :, :, :64], v, dense, 16).argument.startswith("k")
    assert _err(bsa, q, k.astype(np.float64), v, dense, 16).argument.startswith("k")
    assert _err(bsa, q, k, v, dense, 24).argument.startswith("geometry.block")
    assert _err(bsa, q, k, v, dense, (16, 2048)).argument == "geometry.block_kv"
    assert _err(bsa, q, k, v, dense, None).argument == "block_size"
    assert _err(bsa, q, k, v, dense, "16").argument == "block_size"
    assert _err(bsa, q, k, v, dense[:, :, :3], 16).argument.startswith("mask")  # n_qb != ceil(N_q / B_Q)
    assert _err(bsa, q, k, v, dense.astype(np.float32), 16).argument == "block_mask"
    assert _err(bsa, q, k, v, dense[0], 16).argument == "block_mask"
    assert _err(bsa, q, k, v, [[1]], 16).argument == "block_mask"
    assert _err(bsa, q, k, v, ("coo", dense), 16).argument == "block_mask"
    assert _err(bsa, q, k, v, dense, 16, scale=float("nan")).argument == "scale"
    assert _err(bsa, q.astype(np.int32), k, v, dense, 16).argument == "q"
    assert _err(bsa, q, k, v, dense, 16, mask_version=-1).argument == "mask_version"
    assert _err(bsa, q, k, v, dense, 16, plan_id=3).argument == "plan_id"
    h3 = qkv(rng, 1, 64, 64, 3, 2, 128)
    assert _err(bsa, *h3, np.ones((1, 1, 4, 4), bool), 16).argument.startswith("k")  # 3 % 2 != 0


def test_mask_content_errors(rng):
    bsa = tessera.block_sparse_attention
    q, k, v = qkv(rng, 1, 64, 64, 1, 1, 128)
    ro = np.array([0, 1, 2, 3, 4], dtype=np.int32)
    assert _err(bsa, q, k, v, ("csr", ro, np.array([0, 1, 2, 4], np.int32), (1, 1, 4, 4)), 16).argument \
        == "mask.col_indices"  # 4 out of range
    assert _err(bsa, q, k, v, ("csr", np.array([0, 2, 2, 2, 2], np.int32), np.array([1, 0], np.int32), (1, 1, 4, 4)),
                16).argument == "mask.col_indices"  # not increasing
    assert _err(bsa, q, k, v, ("csr", ro[:4], np.zeros(3, np.int32), (1, 1, 4, 4)), 16).argument.startswith("mask")
    counts = np.array([[[1, 1, 1, 1]]], np.int32)
    assert _err(bsa, q, k, v, ("index_lists", counts, np.array([[[[0], [1], [2], [9]]]], np.int32), 4),
                16).argument == "mask.indices"
    assert _err(bsa, q, k, v, ("index_lists", counts, np.zeros((1, 1, 4, 1), np.float32), 4),
                16).argument == "block_mask.indices"
    assert _err(bsa, q, k, v, ("csr", ro, ro, (1, 1, 4)), 16).argument == "block_mask.extents"
    assert _err(bsa, q, k, v, ("index_lists", counts), 16).argument == "block_mask"


# ------------------------------------------------------------------------------------------ torch CPU tensors

@needs_torch
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_torch_cpu_tensors(dtype, rng):
    q, k, v = qkv(rng, 1, 64, 64, 2, 2, 128)
    dense = random_mask(rng, (1, 2, 4, 4), density=0.5)
    tq, tk, tv = (torch.from_numpy(x).to(getattr(torch, dtype)) for x in (q, k, v))
    o, lse = tessera.block_sparse_attention(tq, tk, tv, torch.from_numpy(dense), 16, return_lse=True)
    assert isinstance(o, torch.Tensor) and o.dtype == tq.dtype and lse.dtype == torch.float32
    o_ref, _ = reference_attention(tq.double().numpy(), tk.double().numpy(), tv.double().numpy(), dense, 16, 16)
    assert rel_l2(o.double().numpy(), o_ref) < (1e-2 if dtype == "bfloat16" else 5e-3)


@needs_torch
def test_torch_compile_cpu_custom_op(rng):
    """Under torch.compile the call goes through torch.ops.tessera.block_sparse_attention (fake impl for shapes) with
    no graph break; on CPU tensors it runs the CPU path."""
    q, k, v = (torch.from_numpy(x) for x in qkv(rng, 1, 100, 80, 4, 2, 128))
    dense = random_mask(rng, (1, 4, 4, 5), density=0.5)
    dense[0, 0, 1] = False
    ro, ci = dense_to_csr(dense)
    ro_t, ci_t, dense_t = torch.from_numpy(ro), torch.from_numpy(ci), torch.from_numpy(dense)

    def f(q, k, v, ro, ci):
        o, lse = tessera.block_sparse_attention(q * 1.0, k, v, ("csr", ro, ci, (1, 4, 4, 5)), (32, 16),
                                                return_lse=True)
        return o + 1.0, lse

    o_c, lse_c = torch.compile(f, fullgraph=True)(q, k, v, ro_t, ci_t)
    o_ref, lse_ref = reference_attention(q.numpy(), k.numpy(), v.numpy(), dense, 32, 16)
    assert rel_l2(o_c.numpy() - 1.0, o_ref) < 1e-5
    assert np.array_equal(np.isneginf(lse_c.numpy()), np.isneginf(lse_ref))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    g = torch.compile(lambda a, b, c, m: tessera.block_sparse_attention(a, b, c, m, (32, 16), layout="bhsd"),
                      fullgraph=True)
    assert rel_l2(g(qt, kt, vt, dense_t).transpose(1, 2).numpy(), o_ref) < 1e-5


@needs_torch
def test_custom_op_opcheck_cpu(rng):
    import tessera.ops  # noqa: F401
    q, k, v = (torch.from_numpy(x) for x in qkv(rng, 1, 64, 64, 2, 2, 128))
    dense = torch.from_numpy(random_mask(rng, (1, 2, 4, 4), density=0.5))
    for return_lse in (False, True):
        args = (q, k, v, 0, dense, None, [1, 2, 4, 4], 16, 16, None, False, return_lse, 0, "")
        torch.library.opcheck(torch.ops.tessera.block_sparse_attention.default, args,
                              test_utils=("test_schema", "test_faketensor"))


@needs_torch
def test_backward_is_refused_not_silently_dropped(rng):
    q, k, v = (torch.from_numpy(x) for x in qkv(rng, 1, 64, 64, 1, 1, 128))
    dense = torch.ones(1, 1, 4, 4, dtype=torch.bool)
    with pytest.raises(tessera.TesseraUnsupportedError) as e:
        tessera.block_sparse_attention(q.requires_grad_(), k, v, dense, 16)
    assert e.value.argument == "q" and isinstance(e.value, NotImplementedError)
    with torch.no_grad():
        o = tessera.block_sparse_attention(q, k, v, dense, 16)
    assert o.shape == q.shape and not o.requires_grad


def test_bad_argument_types_raise_tessera_errors(rng):
    """Arguments the binding cannot convert (huge ints, big-endian arrays, arrays as scale, strings/bools as numbers)
    raise TesseraError naming the argument, never a raw TypeError."""
    bsa = tessera.block_sparse_attention
    q, k, v = qkv(rng, 1, 64, 64, 2, 2, 128)
    dense = random_mask(rng, (1, 2, 4, 4))
    assert _err(bsa, q, k, v, dense, (16, 2**40)).argument == "block_size"
    assert _err(bsa, q, k, v, dense, 2**63).argument == "block_size"
    assert _err(bsa, q, k, v, dense, (2**63, 16)).argument == "block_size"
    assert _err(bsa, q.astype(">f4"), k, v, dense, 16).argument == "q"
    assert _err(bsa, q, k.astype(">f4"), v, dense, 16).argument == "k"
    assert _err(bsa, q, k, v, dense, 16, scale=np.array([1.0, 2.0])).argument == "scale"
    assert _err(bsa, q, k, v, dense, 16, scale="1").argument == "scale"
    assert _err(bsa, q, k, v, dense, 16, scale=True).argument == "scale"
    assert _err(bsa, q, k, v, dense, 16, scale=10**400).argument == "scale"
    assert _err(bsa, q, k, v, dense, 16, return_lse="yes").argument == "return_lse"
    assert _err(bsa, q, k, v, dense, 16, return_lse=1).argument == "return_lse"
    assert _err(bsa, q, k, v, dense, 16, return_lse=np.True_).argument == "return_lse"
    assert _err(bsa, q, k, v, dense, 16, return_lse=np.bool_(False)).argument == "return_lse"
    assert _err(bsa, q, k, v, dense, 16, return_lse=None).argument == "return_lse"
    # Accepted scale spellings still work and agree.
    o1 = bsa(q, k, v, dense, 16, scale=0.5)
    o2 = bsa(q, k, v, dense, 16, scale=np.float32(0.5))
    o3 = bsa(q, k, v, dense, 16, scale=np.array(0.5))
    assert np.array_equal(o1, o2) and np.array_equal(o1, o3)


def test_scale_must_be_finite_positive_and_at_most_1e4(rng):
    bsa = tessera.block_sparse_attention
    q, k, v = qkv(rng, 1, 64, 64, 2, 2, 128)
    dense = random_mask(rng, (1, 2, 4, 4))
    for bad in (0, 0.0, -0.0, -1.0, -1e-30, float("inf"), float("-inf"), float("nan"), 1e4 * (1 + 1e-15),
                10001, 1e30, np.float32(-0.5), np.array(0.0), np.float64("inf")):
        e = _err(bsa, q, k, v, dense, 16, scale=bad)
        assert e.argument == "scale", bad
    e = _err(bsa, q, k, v, dense, 16, scale=2e4)
    assert "0 < scale <= 10000" in str(e)
    # The bounds themselves are accepted (1e4 included), and so are tiny positive scales.
    for good in (1e4, 10000, np.float32(1e4), 1e-30, 1):
        o = bsa(q, k, v, dense, 16, scale=good)
        assert np.isfinite(o).all(), good


def test_plan_id_empty_string_is_rejected(rng):
    q, k, v = qkv(rng, 1, 64, 64, 2, 2, 128)
    dense = random_mask(rng, (1, 2, 4, 4))
    e = _err(tessera.block_sparse_attention, q, k, v, dense, 16, plan_id="")
    assert e.argument == "plan_id" and "empty plan id; pass None to select a plan" in str(e)
    assert _err(tessera.explain, q, k, v, dense, 16, plan_id="").argument == "plan_id"
    assert tessera.explain(q, k, v, dense, 16, plan_id=None)["source"] != "forced"


def test_cpu_dtype_message_lists_what_the_cpu_path_accepts(rng):
    q, k, v = qkv(rng, 1, 64, 64, 2, 2, 128)
    dense = random_mask(rng, (1, 2, 4, 4))
    e = _err(tessera.block_sparse_attention, q.astype(np.int32), k, v, dense, 16)
    assert e.argument == "q"
    assert "float16, float32 or float64" in str(e) and "bf16 or f16" not in str(e)


@needs_torch
def test_torch_meta_tensors_are_refused(rng):
    q, k, v = (torch.empty((1, 64, 2, 128), device="meta") for _ in range(3))
    dense = random_mask(rng, (1, 2, 4, 4))
    assert _err(tessera.block_sparse_attention, q, k, v, dense, 16).argument == "q"
    e = _err(tessera.block_sparse_attention, torch.zeros((1, 64, 2, 128), dtype=torch.int32), k, v, dense, 16)
    assert e.argument == "q"


@needs_torch
def test_meta_or_sparse_masks_and_sparse_inputs_are_refused(rng):
    q, k, v = (torch.randn((1, 64, 2, 128), dtype=torch.float32) for _ in range(3))
    dense = torch.from_numpy(random_mask(rng, (1, 2, 4, 4)).astype(np.uint8))
    assert _err(tessera.block_sparse_attention, q, k, v, dense.to("meta"), 16).argument == "block_mask"
    assert _err(tessera.block_sparse_attention, q, k, v, dense.to_sparse(), 16).argument == "block_mask"
    assert _err(tessera.block_sparse_attention, q.to_sparse(), k, v, dense, 16).argument == "q"


def test_last_dispatch_device_argument_is_checked(rng):
    for bad in ("cuda", -1, 1.5, True):
        e = _err(tessera.last_dispatch, bad)
        assert e.argument == "device", (bad, e)


def test_version_is_the_native_librarys():
    """tessera.__version__: the version `tessera version` prints, from the native module (pyproject's version)."""
    import re

    assert re.fullmatch(r"\d+\.\d+\.\d+", tessera.__version__)
    from tessera import _C

    assert tessera.__version__ == _C.version()
