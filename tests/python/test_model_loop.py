"""CPU tests of the model-level loop's pieces (bench/model): the cube token order (numpy), VSA's selection rule and
pooling against a numpy brute force (torch), the mask statistics and the summary / speedup accounting of run.py."""
import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from bench.model import run as model_run  # noqa: E402
from bench.model.vsa import block_token_counts, cube_token_order, n_blocks, topk_count  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flex_emulation import flex_triton_emulation as _flex_triton_emulation  # noqa: E402  (this directory; torch inside)


def _coords(grid):
    f, h, w = np.meshgrid(*(np.arange(g) for g in grid), indexing="ij")
    return np.stack([f.ravel(), h.ravel(), w.ravel()], 1)


@pytest.mark.parametrize("grid", [(21, 45, 80), (5, 8, 12), (4, 4, 4), (3, 5, 7), (8, 8, 8)])
def test_cube_order_is_a_permutation_with_full_cubes_first(grid):
    perm = cube_token_order(grid)
    n = int(np.prod(grid))
    assert perm.dtype == np.int64 and sorted(perm.tolist()) == list(range(n))
    xyz = _coords(grid)[perm]
    full = [g // 4 for g in grid]
    n_full = int(np.prod(full)) * 64
    # every 64-token block of the first part is exactly one 4x4x4 cube, in cube raster order, raster inside
    for c in range(n_full // 64):
        blk = xyz[64 * c:64 * (c + 1)]
        cube = blk // 4
        assert (cube == cube[0]).all()
        assert ((cube[0][0] * full[1] + cube[0][1]) * full[2] + cube[0][2]) == c
        raster = (blk[:, 0] * grid[1] + blk[:, 1]) * grid[2] + blk[:, 2]
        assert (np.diff(raster) > 0).all()
    # then only tokens of partial cubes
    rest = xyz[n_full:]
    partial = (rest[:, 0] >= 4 * full[0]) | (rest[:, 1] >= 4 * full[1]) | (rest[:, 2] >= 4 * full[2])
    assert partial.all() and len(rest) == n - n_full


def test_wan720_edge_blocks_are_local_slabs():
    """21 x 45 x 80: 1,100 cubes, then 25 blocks of 4 x 1 x 16 (the last row of every cube layer), 55 of 1 x 4 x 16
    (the last frame), one 1 x 1 x 64 corner block and a 16-token tail: 1,182 blocks."""
    grid = (21, 45, 80)
    perm = cube_token_order(grid)
    xyz = _coords(grid)[perm]
    assert n_blocks(len(perm), 64) == 1182
    assert block_token_counts(len(perm), 64).tolist() == [64] * 1181 + [16]
    ext = []
    for b in range(1100, 1182):
        blk = xyz[64 * b:64 * (b + 1)]
        ext.append(tuple(int(x) for x in blk.max(0) - blk.min(0) + 1))
    assert ext[:25] == [(4, 1, 16)] * 25
    assert ext[25:80] == [(1, 4, 16)] * 55
    assert ext[80] == (1, 1, 64) and ext[81] == (1, 1, 16)


def test_cube_order_errors():
    with pytest.raises(ValueError, match="grid"):
        cube_token_order((4, 4))
    with pytest.raises(ValueError, match="cube"):
        cube_token_order((4, 4, 4), (4, 0, 4))


def test_topk_count():
    assert topk_count(1182, 0.1) == 119
    assert topk_count(8, 0.1) == 1 and topk_count(8, 1.0) == 8 and topk_count(10, 0.3) == 3
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="density"):
            topk_count(10, bad)


# ------------------------------------------------------------------------------------------------ torch
def _brute_pool(x, block):
    b, n, h, d = x.shape
    out = np.zeros((b, h, n_blocks(n, block), d))
    for j in range(out.shape[2]):
        out[:, :, j] = x[:, block * j:block * (j + 1)].mean(1)
    return out


def test_pool_and_topk_against_brute_force():
    torch = pytest.importorskip("torch")
    from bench.model.vsa import index_lists_to_dense, pool_blocks, vsa_topk

    rng = np.random.default_rng(5)
    b, n, h, d = 1, 1000, 3, 64  # 16 blocks of 64, the last 40 tokens
    q, k = rng.standard_normal((2, b, n, h, d)).astype(np.float32)
    qt, kt = torch.from_numpy(q), torch.from_numpy(k)
    assert np.allclose(pool_blocks(qt, 64).numpy(), _brute_pool(q, 64), atol=1e-5)
    assert np.allclose(pool_blocks(qt.to(torch.bfloat16), 64).numpy(),
                       _brute_pool(qt.to(torch.bfloat16).float().numpy(), 64), atol=1e-5)
    counts, idx = vsa_topk(qt, kt, (64, 64), 0.25)
    assert counts.dtype == torch.int32 and idx.dtype == torch.int32
    assert idx.shape == (b, h, 16, 4) and (counts == 4).all()
    scores = np.einsum("bhid,bhjd->bhij", _brute_pool(q, 64), _brute_pool(k, 64))
    for hh in range(h):
        for i in range(16):
            row = idx[0, hh, i].tolist()
            assert len(set(row)) == 4  # distinct kv blocks, exactly k per row
            assert set(row) == set(np.argsort(-scores[0, hh, i])[:4].tolist())
    dense = index_lists_to_dense(idx, 16)
    assert dense.shape == (b, h, 16, 16) and (dense.sum(-1) == 4).all()
    # the mask rule on a strided view (FlashInfer's [H, N, D] layout seen as [1, N, H, D]) gives the same lists
    hnd = qt[0].transpose(0, 1).contiguous()
    counts2, idx2 = vsa_topk(hnd.transpose(0, 1).unsqueeze(0), kt, (64, 64), 0.25)
    assert torch.equal(idx, idx2)
    with pytest.raises(ValueError, match="q, k"):
        vsa_topk(qt, kt[:, :, :2], (64, 64), 0.25)


def test_mask_stats_and_overlap():
    torch = pytest.importorskip("torch")
    idx = torch.tensor([[[[0, 1, 2], [5, 1, 7], [4, 3, 9]]]], dtype=torch.int32)  # [1, 1, 3, 3]
    st = model_run.mask_stats(idx, 10)
    assert st["k_per_row"] == 3 and st["density"] == pytest.approx(0.3)
    assert st["runs_per_row"] == pytest.approx((1 + 3 + 2) / 3)
    assert st["diagonal_inclusion"] == pytest.approx(2 / 3)  # rows 0 and 1 keep their own block
    assert model_run.overlap(idx, idx) == 1.0
    other = torch.tensor([[[[0, 1, 3], [5, 6, 8], [2, 3, 9]]]], dtype=torch.int32)
    assert model_run.overlap(idx, other) == pytest.approx((2 + 1 + 2) / 9)


def test_summary_and_speedups():
    def step(step_ms, att, mask, layout, kern=None):
        kern = att if kern is None else kern
        return {"step_ms": step_ms, "attention_ms": att, "kernel_ms": kern, "convert_ms": att - kern,
                "mask_ms": mask, "layout_ms": layout, "rest_ms": step_ms - att - mask - layout}

    t = model_run.summarize([step(100, 40, 5, 5), step(120, 60, 5, 5)], 50)
    assert t["step_ms"] == 110 and t["attention_ms"] == 50 and t["sparsifier_ms"] == 10
    assert t["attention_share"] == pytest.approx(50 / 110) and t["extrapolated_50_steps_s"] == pytest.approx(5.5)
    d = model_run.summarize([step(200, 150, 0, 0)], 50)
    sp = model_run.speedups({"tessera": {"summary": t}, "dense": {"summary": d}, "flex": {"error": "x"}})
    assert set(sp) == {"tessera_vs_dense", "dense_vs_tessera"}
    assert sp["tessera_vs_dense"]["attention"] == pytest.approx(3.0)
    assert sp["tessera_vs_dense"]["attention_plus_sparsifier"] == pytest.approx(2.5)
    assert sp["tessera_vs_dense"]["step"] == pytest.approx(200 / 110, abs=1e-3)


# ------------------------------------------------------------------------------------------------ HunyuanVideo STA
from bench.model.sta import joint_mask, sta_token_order  # noqa: E402
from bench.peers.workloads import STA_GRID, load_sta_table, sta_head_mask, sta_mask  # noqa: E402


@pytest.mark.parametrize("grid,tile", [((30, 48, 80), (6, 8, 8)), ((4, 8, 8), (2, 4, 4)), ((3, 5, 7), (1, 5, 7))])
def test_sta_order_puts_each_tile_in_one_block_in_raster_order(grid, tile):
    perm = sta_token_order(grid, tile)
    n, b = int(np.prod(grid)), int(np.prod(tile))
    assert perm.dtype == np.int64 and sorted(perm.tolist()) == list(range(n))
    xyz = _coords(grid)[perm].reshape(n // b, b, 3)
    tiles = xyz // np.array(tile)
    assert (tiles == tiles[:, :1]).all()  # one tile per block
    tg = [g // t for g, t in zip(grid, tile)]
    want = np.stack(np.meshgrid(*(np.arange(g) for g in tg), indexing="ij"), -1).reshape(-1, 3)
    assert np.array_equal(tiles[:, 0], want)  # tiles in tile-raster order
    inner = xyz - tiles * np.array(tile)
    assert np.array_equal(inner[0], _coords(tile))  # raster order inside a tile
    with pytest.raises(ValueError):
        sta_token_order((30, 48, 80), (7, 8, 8))


def test_joint_mask_is_sta_on_video_tiles_and_dense_on_text():
    wins = [(3, 3, 3), (1, 6, 10), (5, 6, 10), (3, 1, 5)]
    m = joint_mask(wins, STA_GRID, text=True)
    nt = int(np.prod(STA_GRID))
    assert m.shape == (4, nt + 1, nt + 1)
    for h, w in enumerate(wins):
        assert np.array_equal(m[h, :nt, :nt], sta_head_mask(w))
    assert m[:, :, nt].all() and m[:, nt, :].all()
    assert np.array_equal(joint_mask(wins, STA_GRID, text=False), m[:, :nt, :nt])
    table = load_sta_table()  # the real table: the windows of (step 20, layer 10) as the peers' STA workload
    wins = [tuple(table[f"20_10_{h}"]) for h in range(24)]
    assert np.array_equal(joint_mask(wins, STA_GRID, text=False), sta_mask(table, 20, 10))


def test_sta_index_lists_rebuild_the_joint_mask():
    torch = pytest.importorskip("torch")
    from bench.model.hunyuan import HUNYUAN_CONFIGS, StaMasks
    from bench.model.vsa import index_lists_to_dense

    for name in ("tiny-hv", "hunyuan-768p"):
        cfg = HUNYUAN_CONFIGS[name]
        sm = StaMasks(cfg, torch.device("cpu"))
        for step, layer in ((20, 0), (33, 59)):
            counts, idx = sm(step, layer)
            dense = sm.dense(step, layer)
            nb = dense.shape[-1]
            assert counts.shape == (1, cfg.heads, nb) and idx.dtype == torch.int32
            assert torch.equal(counts[0], torch.from_numpy(dense.sum(-1)).int())
            assert torch.equal(index_lists_to_dense(idx[0], nb), torch.from_numpy(dense))
            assert nb == int(np.prod(cfg.tile_grid)) + 1 and -(-cfg.tokens // cfg.block) == nb


# ------------------------------------------------------------------------------------------------ Flex, ragged tail
def _joint_case(seed):
    """A HunyuanVideo-shaped joint mask: two 384-token video tiles (each attends itself and the text block) and a
    256-token text block (attends everything): N = 1,024 = 8 x 128, not a multiple of 384. Index lists as StaMasks
    writes them (entries past a row's count repeat its last block); random q, k, v [1, N, 2, 16]; a FlexBackend for
    384-token blocks. Returns (torch, n, counts, idx, q, k, v, backend, generator)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch.nn.attention.flex_attention")
    from bench.model.backends import FlexBackend

    counts = torch.tensor([[[2, 2, 3], [2, 2, 3]]], dtype=torch.int32)
    idx = torch.tensor([[[[0, 2, 2], [1, 2, 2], [0, 1, 2]], [[0, 2, 2], [1, 2, 2], [0, 1, 2]]]], dtype=torch.int32)
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1024, 2, 16, generator=g) for _ in range(3))
    return torch, 1024, counts, idx, q, k, v, FlexBackend(384), g


def _masked_reference(torch, q, k, v, counts, idx, block):
    from bench.model.vsa import index_lists_to_dense

    n = q.shape[1]
    tok = torch.arange(n) // block
    allowed = index_lists_to_dense(idx[0], -(-n // block))[:, tok][:, :, tok]
    o = torch.nn.functional.scaled_dot_product_attention(*(x.transpose(1, 2).double() for x in (q, k, v)),
                                                         attn_mask=allowed.unsqueeze(0))
    return o.transpose(1, 2)


def test_flex_backend_keeps_the_kernel_inside_the_tensors_on_a_ragged_tail():
    """HunyuanVideo 768p's Flex failure in miniature: 384-token blocks over 128-token kernel tiles and N a multiple of
    128 but not of 384. Through the emulated kernel, the backend's call must equal the masked attention: before the
    padding, the text block's third tile was read past the end of k and v (NaN here) in every video row."""
    torch, n, counts, idx, q, k, v, fb, _ = _joint_case(0)
    assert fb.kernel_options == {}  # the default tiles (128) inside the 384-token blocks, as on the GPU
    seen = []

    def emulated(qq, kk, vv, bm):
        seen.append((qq.shape[2], bm.seq_lengths, bm.BLOCK_SIZE))
        return _flex_triton_emulation(qq, kk, vv, bm).to(qq.dtype)

    fb.fn = emulated
    perm = torch.arange(n)
    qb, kb, vb = (fb.gather(x, perm) for x in (q, k, v))
    o = fb.attend(qb, kb, vb, counts, idx, lambda name: None)
    assert o.shape == (1, n, 2, 16)
    ref = _masked_reference(torch, q, k, v, counts, idx, 384)
    assert torch.isfinite(o).all()
    assert float((o.double() - ref).norm() / ref.norm()) < 1e-6
    rows, seq, bs = seen[0]
    assert rows % bs[1] == 0 and seq == (rows, rows)  # every tile of every listed block inside the tensors
    # the views the loop hands to the mask rule and the reference check hold the real tokens only
    assert fb.as_bshd(qb).shape == (1, n, 2, 16) and fb.as_hnd(kb).shape == (2, n, 16)
    assert "padded to 1152" in fb.info()["ragged_tail"]
    # a direct call (tensors not from gather) is padded inside attend, same result
    o2 = fb.attend(*(x.transpose(1, 2) for x in (q, k, v)), counts, idx, lambda name: None)
    assert float((o2.double() - ref).norm() / ref.norm()) < 1e-6


def test_flex_block_mask_lists_real_blocks_first_and_the_ragged_block_as_partial():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch.nn.attention.flex_attention")
    from bench.model.backends import FlexBackend

    fb = FlexBackend(64)
    # 3 blocks of 64 + a 16-token tail (N = 208); row 0 lists [2, 0] and pads with a repeat of block 0 (not the
    # largest): the lists must still be {0, 2}, not {0, 0}
    counts = torch.tensor([[[2, 4, 1, 3]]], dtype=torch.int32)
    idx = torch.tensor([[[[2, 0, 0, 0], [3, 1, 0, 2], [1, 1, 1, 1], [3, 2, 0, 0]]]], dtype=torch.int32)
    bm = fb.block_mask(counts, idx, 208)
    assert bm.seq_lengths == (256, 256) and bm.BLOCK_SIZE == (64, 64)
    assert bm.full_kv_num_blocks[0, 0].tolist() == [2, 3, 1, 2]
    assert [bm.full_kv_indices[0, 0, r, :c].tolist() for r, c in enumerate([2, 3, 1, 2])] == \
        [[0, 2], [0, 1, 2], [1], [0, 2]]
    assert bm.kv_num_blocks[0, 0].tolist() == [0, 1, 0, 1] and (bm.kv_indices[0, 0, :, 0] == 3).all()
    assert not bool(bm.mask_mod(0, 0, torch.tensor(0), torch.tensor(208)))
    assert bool(bm.mask_mod(0, 0, torch.tensor(0), torch.tensor(207)))
    fb.form = "partial"
    bm = fb.block_mask(counts, idx, 208)
    assert bm.full_kv_num_blocks is None and bm.kv_num_blocks[0, 0].tolist() == [2, 4, 1, 3]
    assert bm.kv_indices[0, 0, 0, :2].tolist() == [0, 2]
    # a whole number of blocks: no padding, as before
    bm = FlexBackend(64).block_mask(counts, idx, 256)
    assert bm.seq_lengths == (256, 256) and bm.kv_num_blocks.sum() == 0
    assert bm.full_kv_num_blocks[0, 0].tolist() == [2, 4, 1, 3]


def test_flex_backend_on_a_ragged_tail_with_the_real_kernel():
    """The same joint mask through torch.compile(flex_attention) on the CPU (inductor's C++ kernel, not the GPU's
    Triton one): the padded sequence and the partial last block give the masked attention."""
    torch, n, counts, idx, q, k, v, fb, g = _joint_case(1)
    perm = torch.randperm(n, generator=g)
    inv = torch.argsort(perm)
    qb, kb, vb = (fb.gather(x, perm) for x in (q, k, v))
    try:
        o = fb.attend(qb, kb, vb, counts, idx, lambda name: None)
    except Exception as ex:  # no C++ toolchain for inductor here
        if "Compile" in type(ex).__name__ or "Inductor" in type(ex).__name__:
            pytest.skip(f"FlexAttention does not compile on this CPU: {type(ex).__name__}")
        raise
    ref = _masked_reference(torch, *(x.index_select(1, perm) for x in (q, k, v)), counts, idx, 384)
    assert float((o.double() - ref).norm() / ref.norm()) < 1e-5
    assert fb.scatter(o, inv).shape == (1, n, 2, 16)


# ------------------------------------------------------------------------------------------------ report.py
from bench.model import report as model_report  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
RESULTS = os.path.join(ROOT, "bench", "results", "model")


def _sta_doc():
    """A HunyuanVideo + STA JSON as run.py writes it (density null, tiles, masks), with the null fields a failing
    backend leaves: a non-finite check, null agreements, a backend that never ran."""
    step = {"step_ms": 7339.3, "attention_ms": 2701.9, "kernel_ms": 2700.1, "convert_ms": 1.8, "mask_ms": 167.9,
            "layout_ms": 97.9, "rest_ms": 4371.6, "attention_share": 0.37, "sparsifier_ms": 265.8,
            "steps_measured": 2, "extrapolated_50_steps_s": 367.0}
    check = {"step": 20, "layer": 0, "rel_l2": 0.00168, "density": 0.18}
    return {
        "schema": "tessera-model-loop/1", "revision": "abc", "date": "2026-12-02", "command": "run.py",
        "env": {"gpu": "NVIDIA H200", "torch": "2.11.0", "diffusers": "0.36.0"},
        "config": {"name": "hunyuan-768p", "latent": [30, 96, 160], "grid": [30, 48, 80], "tokens": 115456,
                   "layers": 60, "layers_of_model": 60, "heads": 24, "head_dim": 128, "ffn": 12288,
                   "text_tokens": 256, "block": 384, "density": None, "video_tokens": 115200, "tile": [6, 8, 8],
                   "tile_grid": [5, 6, 10], "dual_layers": 20, "single_layers": 40, "parameters": None,
                   "masks": "FastVideo's STA table", "token_order": "STA tile-major", "schedule": "shift 7.0",
                   "guidance": "embedded guidance 6.0"},
        "backends": {
            "tessera": {"summary": step, "checks": [check, dict(check, layer=59)],
                        "mask_stats": [{"k_per_row": 54.53, "density": 0.181, "runs_per_row": None,
                                        "diagonal_inclusion": 1.0, "step": 1, "layer": 0}],
                        "info": {"plans": {"sm90a.x": 180}}},
            "flex": {"summary": dict(step, attention_share=None), "checks": [check, dict(check, rel_l2=None)],
                     "note": "FAILS the bf16 check on 1 of 2 checked calls", "latent_finite": False},
            "dense": {"error": "not run: time budget", "checks": []},
        },
        "agreement": {"step0_prediction_rel_l2": {"tessera_vs_flex": None}, "tolerance": 0.01},
        "speedups": {"tessera_vs_flex": {"attention": 1.557, "attention_plus_sparsifier": None, "step": 1.135}},
    }


def test_report_describes_sta_from_the_config_and_survives_null_fields(tmp_path):
    doc = _sta_doc()
    md = model_report.markdown(doc, "step_time.png", "x.json")
    assert "HunyuanVideoTransformer3DModel" in md and "WanTransformer3DModel" not in md and "VSA" not in md
    assert "FastVideo's STA table" in md and "115,456 joint tokens" in md and "tiles 6 x 8 x 8" in md
    assert "20 dual-stream + 40 single-stream" in md and "384-token blocks" in md
    flex_row = next(line for line in md.splitlines() if line.startswith("| flex"))
    assert "non-finite in 1 of 2; finite max 1.7e-03" in flex_row and "| - |" in flex_row
    assert "tessera vs flex non-finite" in md and "FAILS the bf16 check" in md
    assert "flex: the latent after its last measured step is non-finite" in md
    assert "| dense | not run: time budget |" in md
    assert model_report.mask_label(doc["config"]) == "STA, 384-token tiles"
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    assert model_report.main([str(p), "--md", str(tmp_path / "R.md"), "--chart", str(tmp_path / "c.png"),
                              "--note", "Regenerated here."]) == 0
    text = (tmp_path / "R.md").read_text()
    assert text.splitlines()[2] == "Regenerated here."
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_report_extrapolation_header_follows_the_schedule():
    doc = _sta_doc()
    assert "| 50 steps (s) |" in model_report.markdown(doc, "step_time.png", "x.json")
    for b in doc["backends"].values():  # a run with --schedule-steps 30
        s = b.get("summary")
        if s:
            s["extrapolated_30_steps_s"] = s.pop("extrapolated_50_steps_s") * 30 / 50
    md = model_report.markdown(doc, "step_time.png", "x.json")
    assert "| 30 steps (s) |" in md and "50 steps (s)" not in md


def test_report_describes_wan_vsa_from_the_config():
    doc = _sta_doc()
    c = doc["config"]
    for k in ("video_tokens", "tile", "tile_grid", "dual_layers", "single_layers", "masks"):
        del c[k]
    c.update(name="wan14b-720p", tokens=75600, block=64, density=0.1, text_tokens=512, token_order="cube order")
    md = model_report.markdown(doc)
    assert "WanTransformer3DModel" in md and "HunyuanVideo" not in md and "STA" not in md
    assert "VSA top-k on the live q/k, 10% of the 64-token blocks per row" in md and "75,600 video tokens" in md
    assert model_report.mask_label(c) == "VSA top-10%"


@pytest.mark.parametrize("rel", ["latest.json", os.path.join("hunyuan-768p", "latest.json")])
def test_report_on_the_committed_device_results(rel, tmp_path):
    """The committed GPU JSONs of both models (Wan2.1-14B VSA, HunyuanVideo 768p STA) report without error, each
    described as its own model, and every backend row is in the table."""
    path = os.path.join(RESULTS, rel)
    if not os.path.exists(path):
        pytest.skip(f"{path} not committed")
    with open(path) as f:
        doc = json.load(f)
    assert model_report.main([path, "--md", str(tmp_path / "R.md"), "--chart", str(tmp_path / "c.png")]) == 0
    md = (tmp_path / "R.md").read_text()
    c = doc["config"]
    assert c["name"] in md and f"{c['tokens']:,}" in md
    assert ("HunyuanVideoTransformer3DModel" in md) == (c.get("density") is None)
    assert ("WanTransformer3DModel" in md) == (c.get("density") is not None)
    for n, b in doc["backends"].items():
        row = next(line for line in md.splitlines() if line.startswith(f"| {n}"))
        if any(x.get("rel_l2") is None for x in b.get("checks", [])):
            assert "non-finite" in row


# --------------------------------------------------------------------- report.py --into: one section per config
def _wan_doc():
    doc = _sta_doc()
    c = doc["config"]
    for k in ("video_tokens", "tile", "tile_grid", "dual_layers", "single_layers", "masks"):
        del c[k]
    c.update(name="wan14b-720p", model="WanTransformer3DModel", tokens=75600, block=64, density=0.1)
    return doc


def _splice_tree(tmp_path, monkeypatch, head="# Peer scoreboard\n\nThe peers' tables.\n"):
    """bench/RESULTS.md (head) and the two configs' JSONs where the repo keeps them: Wan at results/model/, HunyuanVideo
    at results/model/hunyuan-768p/. The chart is stubbed (a path, no matplotlib), so that its link is always there."""
    bench = tmp_path / "bench"
    (bench / "results" / "model" / "hunyuan-768p").mkdir(parents=True)
    (bench / "RESULTS.md").write_text(head)
    jsons = {"wan14b-720p": bench / "results" / "model" / "latest.json",
             "hunyuan-768p": bench / "results" / "model" / "hunyuan-768p" / "latest.json"}
    jsons["wan14b-720p"].write_text(json.dumps(_wan_doc()))
    jsons["hunyuan-768p"].write_text(json.dumps(_sta_doc()))
    monkeypatch.setattr(model_report, "draw_chart", lambda doc, path: path)
    return bench / "RESULTS.md", jsons


def _into(md, path, *extra):
    assert model_report.main([str(path), "--into", str(md), *extra]) == 0
    return md.read_text()


def _section(text, key):
    begin, end = model_report.markers(key)
    assert text.count(begin) == 1 and text.count(end) == 1, key
    return text[text.index(begin):text.index(end) + len(end)]


def test_section_key_from_the_config_name():
    assert model_report.section_key("wan14b-720p") == "wan14b-720p"
    assert model_report.section_key("hunyuan 768p -- x/y") == "hunyuan-768p-x-y"
    assert model_report.section_key(None) == "" and model_report.section_key("?") == ""
    assert model_report.markers("hunyuan-768p") == ("<!-- model:hunyuan-768p begin -->",
                                                     "<!-- model:hunyuan-768p end -->")


def test_splice_two_configs_side_by_side(tmp_path, monkeypatch):
    md, jsons = _splice_tree(tmp_path, monkeypatch)
    _into(md, jsons["wan14b-720p"])
    text = _into(md, jsons["hunyuan-768p"], "--note", "Flex's rows predate the fix.")
    assert text.startswith("# Peer scoreboard\n\nThe peers' tables.\n\n<!-- model:wan14b-720p begin -->\n")
    wan, hv = _section(text, "wan14b-720p"), _section(text, "hunyuan-768p")
    assert text.index(wan) < text.index(hv) and text.endswith(hv + "\n")
    assert "## Model-level loop: wan14b-720p (Wan2.1" in wan and "HunyuanVideo" not in wan
    assert "## Model-level loop: hunyuan-768p (HunyuanVideo" in hv and "Flex's rows predate the fix." in hv
    # Each section links its own config's chart and JSON, relative to bench/RESULTS.md.
    assert "![step time split](results/model/step_time.png)" in wan
    assert "![step time split](results/model/hunyuan-768p/step_time.png)" in hv
    assert "Source: `results/model/latest.json`" in wan and "Source: `results/model/hunyuan-768p/latest.json`" in hv
    # ... and the RESULTS.md beside each JSON links the chart beside it.
    assert "![step time split](step_time.png)" in (jsons["hunyuan-768p"].parent / "RESULTS.md").read_text()
    assert "<!-- model-loop -->" not in text


def test_resplicing_one_config_replaces_only_its_own_section(tmp_path, monkeypatch):
    md, jsons = _splice_tree(tmp_path, monkeypatch)
    _into(md, jsons["wan14b-720p"])
    _into(md, jsons["hunyuan-768p"])
    md.write_text(md.read_text() + "\nA paragraph after the model sections.\n")
    before = md.read_text()
    doc = _wan_doc()
    doc["revision"] = "fedcba987654"
    jsons["wan14b-720p"].write_text(json.dumps(doc))
    text = _into(md, jsons["wan14b-720p"])
    assert _section(text, "hunyuan-768p") == _section(before, "hunyuan-768p")
    wan = _section(text, "wan14b-720p")
    assert "revision fedcba987654" in wan and "revision abc" not in wan
    assert text.replace(wan, "") == before.replace(_section(before, "wan14b-720p"), "")  # nothing else moved
    # Splicing the same JSON again changes nothing; a third config goes after the last model section, not at the end.
    assert _into(md, jsons["wan14b-720p"]) == text
    doc["config"]["name"] = "wan1.3b-720p"
    third = tmp_path / "third.json"
    third.write_text(json.dumps(doc))
    text = _into(md, third)
    hv, small = _section(text, "hunyuan-768p"), _section(text, "wan1.3b-720p")
    assert text.index(hv) < text.index(small) < text.index("A paragraph after the model sections.")


LEGACY = ("<!-- model-loop -->\n## Model-level loop: wan14b-720p (issue 20)\n\nThe old Wan table.\n\n"
          "![step time split](results/model/step_time.png)\n<!-- /model-loop -->\n")


def test_old_single_marker_section_migrates(tmp_path, monkeypatch):
    md, jsons = _splice_tree(tmp_path, monkeypatch, head="# Peers\n\n" + LEGACY + "\nTrailing text.\n")
    # Splicing another config keeps the old Wan section (now under its own markers) and goes right after it.
    text = _into(md, jsons["hunyuan-768p"])
    assert "<!-- model-loop -->" not in text and "<!-- /model-loop -->" not in text
    wan, hv = _section(text, "wan14b-720p"), _section(text, "hunyuan-768p")
    assert "The old Wan table." in wan
    assert text.startswith("# Peers\n\n" + wan + "\n\n" + hv + "\n\nTrailing text.\n")
    # Splicing Wan then replaces the migrated section in place.
    text = _into(md, jsons["wan14b-720p"])
    assert "The old Wan table." not in text and "revision abc" in _section(text, "wan14b-720p")
    assert text.index(_section(text, "wan14b-720p")) < text.index(hv) < text.index("Trailing text.")


def test_old_single_marker_section_without_a_config_name_and_stale_copies(tmp_path, monkeypatch):
    # No config in its heading: the old splice replaced it with whatever was spliced, and so does this one.
    md, jsons = _splice_tree(tmp_path, monkeypatch,
                             head="# Peers\n\n<!-- model-loop -->\nsomething\n<!-- /model-loop -->\n")
    text = _into(md, jsons["hunyuan-768p"])
    assert "something" not in text and "model-loop -->" not in text
    assert text == "# Peers\n\n" + _section(text, "hunyuan-768p") + "\n"
    # An old section of a config that has its own section already is an older copy: dropped.
    md.write_text(text + "\n" + LEGACY)
    _into(md, jsons["wan14b-720p"])  # (the old Wan section becomes Wan's, then is replaced)
    md.write_text(md.read_text() + "\n" + LEGACY + "\nTrailing text.\n")
    text = _into(md, jsons["hunyuan-768p"])
    assert "model-loop -->" not in text and "The old Wan table." not in text
    assert text.endswith(_section(text, "wan14b-720p") + "\n\nTrailing text.\n")


def test_into_needs_a_config_name(tmp_path, monkeypatch):
    md, jsons = _splice_tree(tmp_path, monkeypatch)
    doc = _wan_doc()
    del doc["config"]["name"]
    jsons["wan14b-720p"].write_text(json.dumps(doc))
    with pytest.raises(SystemExit):
        model_report.main([str(jsons["wan14b-720p"]), "--into", str(md)])
    assert md.read_text() == "# Peer scoreboard\n\nThe peers' tables.\n"


def test_committed_results_md_model_sections_link_their_own_charts():
    """bench/RESULTS.md's model sections: one per committed config JSON, each linking that config's chart and JSON."""
    path = os.path.join(ROOT, "bench", "RESULTS.md")
    text = open(path).read() if os.path.exists(path) else ""
    if "<!-- model:" not in text:
        pytest.skip("no model section in bench/RESULTS.md")
    assert "<!-- model-loop -->" not in text
    import re

    for key, body in re.findall(r"<!-- model:(\S+) begin -->\n(.*?)<!-- model:\1 end -->", text, re.S):
        src = re.search(r"Source: `([^`]+)`", body).group(1)
        with open(os.path.join(ROOT, "bench", src)) as f:
            assert model_report.section_key(json.load(f)["config"]["name"]) == key
        for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", body):
            assert link == os.path.join(os.path.dirname(src), "step_time.png")
            assert os.path.exists(os.path.join(ROOT, "bench", link)), link


def _stub_tree(tmp_path, run_rc, report_rc, write_json=True):
    """A copy of scripts/gpu_model.sh in a tree whose wheels, build, run.py and report.py are stubs."""
    import shutil
    import stat

    root = tmp_path / "tree"
    (root / "scripts").mkdir(parents=True)
    (root / "bench" / "model").mkdir(parents=True)
    (root / "build" / "gpu").mkdir(parents=True)
    (root / "bin").mkdir()
    shutil.copy(os.path.join(ROOT, "scripts", "gpu_model.sh"), root / "scripts")
    # the real helpers (fi_jit_start), with the wheel installation stubbed out
    with open(os.path.join(ROOT, "scripts", "peer_site.sh")) as f:
        (root / "scripts" / "peer_site.sh").write_text(f.read() + "\npeer_site() { :; }\n")
    (root / "build" / "gpu" / "CMakeCache.txt").write_text("")
    for tool in ("cmake", "nvidia-smi"):
        (root / "bin" / tool).write_text("#!/bin/sh\nexit 0\n")
        (root / "bin" / tool).chmod(stat.S_IRWXU)
    (root / "bench" / "model" / "run.py").write_text(
        "import json, os, sys\n"
        "a = sys.argv\n"
        "if '--flashinfer-jit-only' in a: sys.exit(0)\n"
        f"if {write_json!r}:\n"
        "    json.dump({}, open(os.path.join(a[a.index('--out') + 1], 'latest.json'), 'w'))\n"
        f"sys.exit({run_rc})\n")
    (root / "bench" / "model" / "report.py").write_text(
        f"import sys\nprint('Traceback: report failed' if {report_rc} else 'wrote')\nsys.exit({report_rc})\n")
    return root


@pytest.mark.parametrize("run_rc,report_rc,write_json,want", [
    (0, 0, True, 0), (0, 1, True, 1), (3, 1, True, 3), (0, 0, False, 1)])
def test_gpu_model_script_fails_when_its_report_fails(tmp_path, run_rc, report_rc, write_json, want):
    import shutil
    import subprocess

    if shutil.which("bash") is None:
        pytest.skip("no bash")
    root = _stub_tree(tmp_path, run_rc, report_rc, write_json)
    env = dict(os.environ, OUT=str(tmp_path / "out"), PATH=f"{root / 'bin'}:{os.environ['PATH']}",
               MODEL_SECONDS="200")
    r = subprocess.run(["bash", str(root / "scripts" / "gpu_model.sh")], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == want, r.stdout + r.stderr
    if report_rc:
        assert "report failed" in r.stdout
