"""CPU tests of the peer scoreboard's pieces that need no GPU (bench/peers): mask recipes, exact TF/s accounting for
ragged tails, the JSON schema and merging, RESULTS.md and chart generation from a JSON file, the run's command line
and its all-'not run' skeleton, the interleaved timing and FlashInfer's per-form re-plan (fakes on the CPU), Flex's
padded form on a ragged N (the emulated Triton kernel of flex_emulation.py; the CPU kernel where inductor compiles).
No GPU, no FlashInfer: numpy (matplotlib for the charts; torch where a test imports it).

The documents built here are schema examples made up for the tests, not measurements."""
import json
import math
import os
import sys

import pytest

np = pytest.importorskip("numpy")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

from peers import metrics, report, schema, workloads as W  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sta_rule import sta_window_mask  # noqa: E402  (the STA rule as loops, shared with test_mask_files.py)


# ------------------------------------------------------------------------------------------------ accounting
def brute_pairs(mask, n_q, n_kv, bq, bk):
    tok = mask[..., np.arange(n_q) // bq, :][..., np.arange(n_kv) // bk]
    return int(tok.sum())


@pytest.mark.parametrize("n_q,n_kv,bq,bk", [(64, 64, 16, 16), (75, 70, 16, 32), (100, 33, 32, 16), (17, 17, 16, 16),
                                            (128, 200, 64, 64)])
def test_active_pairs_counts_ragged_tails_exactly(n_q, n_kv, bq, bk):
    rng = np.random.default_rng(7)
    m = rng.random((3, -(-n_q // bq), -(-n_kv // bk))) < 0.4
    m[0, -1, -1] = True  # the partial corner block
    assert metrics.active_pairs(m, n_q, n_kv, bq, bk) == brute_pairs(m, n_q, n_kv, bq, bk)


def test_active_pairs_wan_tail():
    # Wan2.1 720p: 75,600 = 1,181 * 64 + 16. A mask with only the last kv block active in every row has
    # N_q * 16 pairs per head, not N_q * 64.
    n, b = 75600, 64
    nb = W.n_blocks(n, b)
    assert nb == 1182 and W.block_lengths(n, b)[-1] == 16
    m = np.zeros((2, nb, nb), dtype=bool)
    m[:, :, -1] = True
    assert metrics.active_pairs(m, n, n, b, b) == 2 * n * 16
    m[:] = True
    assert metrics.active_pairs(m, n, n, b, b) == 2 * n * n


def test_active_pairs_rejects_wrong_extents():
    with pytest.raises(ValueError):
        metrics.active_pairs(np.ones((2, 3, 3), dtype=bool), 64, 64, 16, 16)


def test_tflops_formula():
    # 4 * D * pairs / time: 1e9 pairs at D = 128 in 1 ms = 512 TF/s
    assert metrics.tflops(10**9, 128, 1.0) == pytest.approx(512.0)
    assert metrics.tflops(10**9, 128, None) is None
    assert metrics.tflops(10**9, 128, 0.0) is None


def test_median_and_geomean():
    assert metrics.median([3, 1, 2]) == 2
    assert metrics.median([4, 1, 2, 3]) == 2.5
    assert metrics.geomean([1, 4]) == pytest.approx(2.0)
    assert metrics.geomean([None, 2, float("nan"), 8]) == pytest.approx(4.0)
    assert metrics.geomean([]) is None


# ------------------------------------------------------------------------------------------------ recipes
def test_band_random_density_band_and_seed():
    a = W.band_random(2, 128, 256, 0.10, np.random.default_rng(3))
    b = W.band_random(2, 128, 256, 0.10, np.random.default_rng(3))
    assert a.shape == (2, 128, 256) and a.dtype == bool
    assert (a == b).all()
    assert 0.085 < a.mean() < 0.105  # the band and the random part overlap a little
    rows = np.arange(128)
    assert a[:, rows, (rows * 256) // 128].all()  # the diagonal block is always in the band
    assert not (a == W.band_random(2, 128, 256, 0.10, np.random.default_rng(4))).all()


@pytest.mark.parametrize("window", [(3, 3, 3), (5, 6, 10), (1, 6, 10), (3, 1, 5), (2, 4, 7)])
def test_sta_rule(window):
    m = W.sta_head_mask(window)
    assert (m == sta_window_mask(window)).all()
    assert (m.sum(-1) == window[0] * window[1] * window[2]).all()  # windows shift at the edges, never shrink


def test_real_sta_table_case_and_refinement():
    table = W.load_sta_table()
    assert len(table) == 50 * 60 * 24
    m = W.sta_mask(table, *W.STA_CASE)
    assert m.shape == (24, 300, 300)
    assert abs(m.mean() - 0.165) < 0.002  # h200_baselines.md: step 20 layer 10, density 0.165
    f = W.refine(m, 3)
    assert f.shape == (24, 900, 900)
    n = 115200
    assert metrics.active_pairs(f, n, n, 128, 128) == metrics.active_pairs(m, n, n, 384, 384)
    assert (f[:, ::3, ::3] == m).all() and (f[:, 2::3, 1::3] == m).all()


def test_topk_score_field():
    m = W.topk_score_field(3, 200, 0.10, np.random.default_rng(1))
    assert m.shape == (3, 200, 200)
    assert (m.sum(-1) == 20).all()
    assert (m == W.topk_score_field(3, 200, 0.10, np.random.default_rng(1))).all()
    # distance decay: blocks near the diagonal are selected far more often than distant ones
    dist = np.abs(np.arange(200)[:, None] - np.arange(200)[None, :])
    assert m[:, dist <= 2].mean() > 5 * m[:, dist > 100].mean()


def test_workload_list():
    ws = W.all_workloads()
    names = [w.name for w in ws]
    assert names[:9] == W.FAMILY_NAMES
    assert len(names) == len(set(names))
    by = {w.name: w for w in ws}
    for f in W.FAMILY_NAMES:
        w = by[f]
        assert (w.n, w.heads, w.head_dim) == (32768, 16, 128) and not w.ragged
    assert by["Q64K64-HD"].target_density == 0.05 and by["Q64K64-DD"].target_density == 0.20
    sta = by["STA-HV768-B384"]
    assert (sta.n, sta.heads, sta.block_q, sta.n_qb) == (115200, 24, 384, 300)
    assert by["STA-HV768-B128"].n_qb == 900
    wan = by["Wan720-topk"]
    assert (wan.n, wan.heads, wan.block_q, wan.n_qb) == (75600, 40, 64, 1182) and wan.ragged
    assert by["dense-32k"].target_density == 1.0
    assert by["corpus-eval"].unsupported
    seeds = [(w.mask_seed, w.group) for w in ws if w.group == "families"]
    assert len(set(seeds)) == 9  # one mask seed per family: a filtered run draws the same masks


def test_family_masks_at_smoke_scale():
    for w in W.all_workloads(scale=0.03):
        if w.unsupported or w.group == "sta":
            continue
        m = w.mask()
        assert m.shape == (w.heads, w.n_qb, w.n_kvb)
        if w.target_density and w.target_density < 1:
            assert abs(m.mean() - w.target_density) < 0.5 * w.target_density, w.name


def test_select():
    ws = W.all_workloads()
    assert [w.name for w in W.select(ws, "families")] == W.FAMILY_NAMES
    assert [w.name for w in W.select(ws, "sta,Q16K16")] == ["Q16K16", "STA-HV768-B384", "STA-HV768-B128"]
    assert len(W.select(ws, "all")) == len(ws) == len(W.select(ws, None))
    with pytest.raises(ValueError, match="unknown workload"):
        W.select(ws, "Q99K99")


# ------------------------------------------------------------------------------------------------ schema
def example_doc():
    """A made-up document in the scoreboard's shape (a schema example for these tests, not a measurement)."""
    wls = []
    for name, bq in (("Q64K64", 64), ("Q128K128", 128), ("Wan720-topk", 64)):
        n = 75600 if name.startswith("Wan") else 32768
        wls.append({"name": name, "n": n, "heads": 16, "head_dim": 128, "block_q": bq, "block_kv": bq,
                    "density": 0.1, "active_pairs": 1_000_000_000, "recipe": "example", "mask_seed": 0,
                    "qkv_seed": 0})
    ms = {"tessera": 2.0, "tessera-best": 1.6, "flex": 4.0, "flashinfer": 1.0}
    req = {"tessera": 3.0, "tessera-best": 2.5, "flex": 12.0, "flashinfer": 9.0}
    rows = []
    for w in wls:
        for s in schema.SYSTEMS:
            if s == "cudnn":
                rows.append(schema.error_row(w["name"], s, "not applicable: dense only"))
                continue
            k = ms[s] * (2 if w["name"] == "Q128K128" else 1)
            rows.append(schema.row(w["name"], s, kernel_ms=k, request_ms=req[s], first_call_ms=10.0,
                                   tflops=metrics.tflops(w["active_pairs"], 128, k), rel_l2=2.2e-3,
                                   rel_l2_vs_tessera=None if s == "tessera" else 1.5e-3,
                                   plan="sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4"
                                   if s.startswith("tessera") else None, note=None))
    return {"schema": schema.SCHEMA, "revision": "abc123", "gpu": "NVIDIA H200 (example)", "date": "2026-12-02",
            "command": "bench/peers/run.py --out out", "env": {"torch": "2.11.0", "flashinfer": "0.7.4"},
            "protocol": {"kernel_ms": "example"}, "workloads": wls, "rows": rows}


def test_schema_accepts_the_example():
    doc = example_doc()
    assert schema.validate(doc) == []
    assert schema.validate(doc, complete=True) == []
    json.loads(json.dumps(doc))  # plain JSON


def test_schema_finds_problems():
    doc = example_doc()
    doc["rows"][0]["tflops"] *= 2
    doc["rows"][1]["system"] = "fa3"
    del doc["rows"][2]["rel_l2"]
    doc["rows"].append(dict(doc["rows"][3]))
    doc["rows"][5]["kernel_ms"] = None
    doc["rows"][6]["plan"] = None
    del doc["gpu"]
    p = "\n".join(schema.validate(doc))
    for want in ("tflops", "'fa3'", "missing key 'rel_l2'", "duplicate", "kernel_ms must be a positive",
                 "needs its plan", "'gpu'"):
        assert want in p, want
    doc = example_doc()
    doc["rows"] = doc["rows"][:-1]
    assert schema.validate(doc) == []
    assert any("no row for" in x for x in schema.validate(doc, complete=True))


def test_merge_keeps_measured_rows_over_not_run():
    a = example_doc()
    b = example_doc()
    b["revision"] = "def456"
    b["rows"] = [schema.error_row("Q64K64", "flex", f"{schema.NOT_RUN}: time budget"),
                 schema.row("Q64K64", "flashinfer", kernel_ms=0.5, tflops=metrics.tflops(10**9, 128, 0.5),
                            request_ms=1.0),
                 schema.error_row("STA-HV768-B384", "flex", "RuntimeError: boom")]
    b["workloads"] = [{"name": "STA-HV768-B384", "n": 115200, "heads": 24, "head_dim": 128, "block_q": 384,
                       "block_kv": 384}]
    m = schema.merge(a, b)
    rb = schema.rows_by(m)
    assert rb[("Q64K64", "flex")]["kernel_ms"] == 4.0           # a 'not run' row does not replace a measurement
    assert rb[("Q64K64", "flashinfer")]["kernel_ms"] == 0.5     # a new measurement does
    assert rb[("STA-HV768-B384", "flex")]["error"].startswith("RuntimeError")
    assert m["revision"] == "def456" and [r["revision"] for r in m["merged_from"]] == ["abc123", "def456"]
    assert "STA-HV768-B384" in [w["name"] for w in m["workloads"]]
    assert schema.validate(m) == []


# ------------------------------------------------------------------------------------------------ report
def test_geomeans_and_markdown(tmp_path):
    doc = example_doc()
    g = {x["peer"]: x for x in report.family_geomeans(doc)}
    # families present: Q64K64 and Q128K128 (Wan is not a family). Tessera 2 ms vs FlashInfer 1 ms: 0.5x kernel;
    # request 9 / 3 = 3x; Flex 2x kernel, 4x request; tessera-best 0.8x kernel.
    assert g["flashinfer"]["kernel"] == pytest.approx(0.5) and g["flashinfer"]["request"] == pytest.approx(3.0)
    assert g["flex"]["kernel"] == pytest.approx(2.0) and g["flex"]["request"] == pytest.approx(4.0)
    assert g["tessera-best"]["kernel"] == pytest.approx(0.8)
    assert g["flashinfer"]["n_kernel"] == 2 and g["flashinfer"]["n"] == 9
    md = report.markdown(doc, [], str(tmp_path), "bench/results/peers/latest.json")
    assert "| FlashInfer | 0.50x | 3.00x | 2 / 2 of 9 |" in md
    assert "| FlexAttention | 2.00x | 4.00x | 2 / 2 of 9 |" in md
    assert "not applicable: dense only" in md
    assert "Charts not drawn" in md
    assert "Schema problems" not in md


def test_report_cli_writes_markdown_and_charts(tmp_path):
    p = tmp_path / "latest.json"
    p.write_text(json.dumps(example_doc()))
    md = tmp_path / "docs" / "RESULTS.md"
    assert report.main([str(p), "--md", str(md)]) == 0
    text = md.read_text()
    assert "# Peer scoreboard" in text and "abc123" in text
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "Charts not drawn" in text
        return
    for name in ("tflops.png", "speedup.png"):
        png = tmp_path / name
        assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](../{name})" in text  # linked relative to the Markdown file


def test_report_keeps_model_loop_sections(tmp_path):
    p = tmp_path / "latest.json"
    p.write_text(json.dumps(example_doc()))
    md = tmp_path / "RESULTS.md"
    wan = "<!-- model:wan14b-720p begin -->\n## Model-level loop: wan\n<!-- model:wan14b-720p end -->"
    hv = "<!-- model:hunyuan-768p begin -->\n## Model-level loop: hv\n<!-- model:hunyuan-768p end -->"
    md.write_text("# Peer scoreboard (old)\n\n" + wan + "\n\n" + hv + "\n")
    assert report.main([str(p), "--md", str(md), "--no-charts"]) == 0
    text = md.read_text()
    assert "(old)" not in text and "abc123" in text
    assert text.index("abc123") < text.index(wan) < text.index(hv)  # kept, in order, after the scoreboard
    assert report.main([str(p), "--md", str(md), "--no-charts"]) == 0
    assert md.read_text() == text  # a second run changes nothing
    legacy = "<!-- model-loop -->\n## Model-level loop: old\n<!-- /model-loop -->"
    md.write_text("# Peer scoreboard (old)\n\n" + legacy + "\n")
    assert report.main([str(p), "--md", str(md), "--no-charts"]) == 0
    assert legacy in md.read_text()  # the older single-pair section is kept too


def test_report_cli_merges(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(example_doc()))
    d = example_doc()
    d["rows"] = [schema.error_row("Q64K64", "flex", f"{schema.NOT_RUN}: time budget")]
    b.write_text(json.dumps(d))
    out = tmp_path / "latest.json"
    assert report.main([str(a), str(b), "--out-json", str(out), "--md", str(tmp_path / "R.md"),
                        "--no-charts"]) == 0
    m = json.loads(out.read_text())
    assert schema.rows_by(m)[("Q64K64", "flex")]["kernel_ms"] == 4.0
    with pytest.raises(SystemExit):
        report.main([str(a), str(b), "--md", str(tmp_path / "R.md")])  # merging needs --out-json


def test_report_flags_schema_problems(tmp_path):
    doc = example_doc()
    doc["rows"][0]["tflops"] = 1.0
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    assert report.main([str(p), "--md", str(tmp_path / "R.md"), "--no-charts"]) == 1
    assert "Schema problems" in (tmp_path / "R.md").read_text()


# ------------------------------------------------------------------------------------------------ the run's CLI
def test_run_command_line_and_skeleton(tmp_path, monkeypatch):
    from peers import corpus_requests, run  # no torch at import time

    # Hermetic: no tessera command line, so corpus-eval is the one error workload (a build tree's binary would make
    # the skeleton generate whole requests).
    monkeypatch.setattr(corpus_requests, "find_tessera_bin", lambda repo, explicit=None: None)

    a = run.parse(["--out", str(tmp_path), "--quick", "--workloads", "families,corpus", "--systems",
                   "tessera,flex", "--revision", "r1"])
    assert a.request_reps == 3 and a.flex_candidates == 1 and a.fi_forms == ["auto"] and a.sweep_max_plans == 8
    assert a.sta_case == W.STA_CASE
    full = run.parse(["--out", str(tmp_path)])
    assert full.fi_forms == ["fold", "variable", "cake"] and full.flex_candidates == 2 and full.reps == 10
    with pytest.raises(SystemExit):
        run.parse(["--out", str(tmp_path), "--reps", "5"])  # the protocol's median needs >= 10
    with pytest.raises(SystemExit):
        run.parse(["--out", str(tmp_path), "--systems", "xformers"])
    r = run.Run(a)  # writes the skeleton: every (workload, system) as a 'not run' error row
    doc = json.loads((tmp_path / "latest.json").read_text())
    assert doc == json.loads((tmp_path / f"{doc['date']}_r1.json").read_text())
    assert schema.validate(doc, complete=True) == []
    assert len(doc["rows"]) == 10 * len(schema.SYSTEMS)
    excluded = schema.rows_by(doc)[("Q16K16", "flashinfer")]["error"]
    assert excluded.startswith(schema.NOT_RUN) and "--systems" in excluded
    assert r.left() <= a.seconds


def test_time_estimates_are_sane():
    from peers import run

    a = run.parse(["--out", "/tmp/unused"])
    ws = {w.name: w for w in W.all_workloads()}
    est = {s: run.estimate_s(s, ws["STA-HV768-B384"], {"active_pairs": 52_642_000_000}, a) for s in schema.SYSTEMS}
    assert all(0 < v < 120 for v in est.values()), est
    fam = sum(run.estimate_s(s, ws[f], {"active_pairs": 1_700_000_000, "row_blocks_max": 72}, a)
              for f in W.FAMILY_NAMES for s in schema.SYSTEMS)
    assert fam < 400, fam
    cake = run.estimate_s("flashinfer", ws["Q64K64-HD"], {"active_pairs": 864_000_000, "row_blocks_max": 42}, a)
    assert cake > run.estimate_s("flashinfer", ws["Q64K64"], {"active_pairs": 864_000_000, "row_blocks_max": 72}, a)
    assert math.isfinite(fam)


# ------------------------------------------------------------------------------------------------ corpus-eval
from peers import corpus_requests as CR  # noqa: E402


def write_mask_file(path, dense, meta):
    """A Tessera mask file (safetensors) of a dense bool [H, n_qb, n_kvb], written with numpy alone."""
    from generic_masks import write_mask_file as write

    write(path, dense.astype(bool), meta)


def write_request_dir(root, requests):
    """A whole-request directory: requests = [(family, index, n, heads, B)], random masks (seed = index)."""
    cases = []
    for fam, index, n, heads, b in requests:
        nb = -(-n // b)
        m = np.random.default_rng(index).random((heads, nb, nb)) < 0.1
        rel = f"{fam}/src-{fam.lower()}/c01_{index:04d}.safetensors"
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        write_mask_file(os.path.join(root, rel), m, {"n_q": str(n), "n_kv": str(n), "block_q": str(b),
                                                     "block_kv": str(b), "family": fam})
        cases.append({"file": rel, "family": fam, "source_id": f"src-{fam.lower()}", "model": "m", "sparsifier": "vsa",
                      "kind": "model", "chunk": 1, "split": "evaluation", "step": 9, "layer": 3, "heads": heads,
                      "block_q": b, "block_kv": b, "n_q": n, "n_kv": n, "density": float(m.mean()), "index": index,
                      "case_head_ids": "0"})
    with open(os.path.join(root, "manifest.json"), "w") as f:
        json.dump({"format": "tessera-mask-corpus-v1", "seed": "0", "whole_requests": True,
                   "requests_split": "evaluation", "requests_per_family": 2, "cases": cases}, f)


def test_read_mask_file_round_trip_and_errors(tmp_path):
    dense = np.random.default_rng(0).random((3, 5, 13)) < 0.3  # 13 kv blocks: padding bits in every row
    p = str(tmp_path / "m.safetensors")
    write_mask_file(p, dense, {"n_q": "300", "n_kv": "800", "block_q": "64", "block_kv": "64"})
    meta, m = CR.read_mask_file(p)
    assert m.dtype == bool and m.shape == (3, 5, 13) and (m == dense).all() and meta["heads"] == "3"
    with open(p, "rb") as f:
        good = f.read()
    (tmp_path / "short.safetensors").write_bytes(good[:-1])
    with pytest.raises(CR.MaskFileError, match="short.safetensors"):
        CR.read_mask_file(str(tmp_path / "short.safetensors"))
    write_mask_file(p, dense, {"n_q": "300", "n_kv": "900", "block_q": "64", "block_kv": "64"})  # 15 kv blocks
    with pytest.raises(CR.MaskFileError, match="n_kv"):
        CR.read_mask_file(p)


def test_corpus_workloads_from_a_directory(tmp_path):
    write_request_dir(str(tmp_path), [("Q64K64", 11, 1000, 40, 64), ("Q64K64", 13, 1000, 40, 64),
                                      ("Q128K128", 7, 2048, 24, 128)])
    ws = W.all_workloads(corpus_dir=str(tmp_path))
    corpus = [w for w in ws if w.group == "corpus"]
    assert [w.name for w in corpus] == ["corpus-eval:Q64K64:src-q64k64:c01_0011", "corpus-eval:Q64K64:src-q64k64:c01_0013",
                                        "corpus-eval:Q128K128:src-q128k128:c01_0007"]
    assert "corpus-eval" not in [w.name for w in ws]  # the error placeholder only without a directory
    w = corpus[0]
    assert (w.n, w.heads, w.head_dim, w.block_q, w.n_qb, w.family) == (1000, 40, 128, 64, 16, "Q64K64") and w.ragged
    m = w.mask()
    assert m.shape == (40, 16, 16) and (m == (np.random.default_rng(11).random((40, 16, 16)) < 0.1)).all()
    assert w.describe()["family"] == "Q64K64" and "case 11" in w.describe()["recipe"]
    # TF/s accounting of a ragged whole request: the last block holds 1000 - 15 * 64 = 40 tokens
    lens = np.array([64] * 15 + [40])
    brute = int(sum(lens[i] * lens[j] for h in range(40) for i in range(16) for j in range(16) if m[h, i, j]))
    assert W.mask_stats(m, w.n, 64, 64)["active_pairs"] == brute
    assert metrics.tflops(brute, 128, 1.0) == pytest.approx(4 * 128 * brute / 1e-3 / 1e12)
    # per-family limit, family filter, selection by prefix
    assert len(W.all_workloads(corpus_dir=str(tmp_path), corpus_per_family=1)) == len(ws) - 1
    assert [x.family for x in CR.corpus_workloads(str(tmp_path), W.Workload, ["Q128K128"])] == ["Q128K128"]
    assert [x.name for x in W.select(ws, "corpus-eval:Q64K64")] == [c.name for c in corpus[:2]]
    assert len(W.select(ws, "corpus")) == 3 and len(W.select(ws, "corpus-eval")) == 3
    with pytest.raises(ValueError, match="holds no whole request"):
        CR.corpus_workloads(str(tmp_path), W.Workload, ["Q16K16"])


def test_corpus_dir_must_hold_whole_requests(tmp_path):
    with pytest.raises(FileNotFoundError, match="--corpus-dir"):
        W.all_workloads(corpus_dir=str(tmp_path))
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "tessera-mask-corpus-v1", "cases": []}))
    with pytest.raises(ValueError, match="--whole-requests"):
        W.all_workloads(corpus_dir=str(tmp_path))


def test_run_corpus_source(tmp_path):
    from peers import run

    write_request_dir(str(tmp_path / "req"), [("Q64K64", 11, 1000, 40, 64)])
    a = run.parse(["--out", str(tmp_path / "o"), "--workloads", "corpus", "--corpus-dir", str(tmp_path / "req"),
                   "--revision", "r1"])
    r = run.Run(a)
    assert [w.name for w in r.workloads] == ["corpus-eval:Q64K64:src-q64k64:c01_0011"]
    doc = json.loads((tmp_path / "o" / "latest.json").read_text())
    assert schema.validate(doc, complete=True) == [] and doc["workloads"][0]["heads"] == 40
    # no directory and no tessera binary: one error workload saying why
    a = run.parse(["--out", str(tmp_path / "o2"), "--workloads", "corpus", "--tessera-bin", "",
                   "--corpus-gen-dir", str(tmp_path / "gen")])
    a.tessera_bin = None
    src = run.corpus_source(a) if CR.find_tessera_bin(W.REPO) is None else {"corpus_error": "x"}
    assert "corpus_error" in src and "corpus_dir" not in src
    with pytest.raises(SystemExit):
        run.parse(["--out", str(tmp_path), "--corpus-families", "Q64K64,Bogus"])
    with pytest.raises(SystemExit):
        run.parse(["--out", str(tmp_path), "--corpus-requests", "0"])
    assert CR.generate_command("t", "D", ["Q64K64", "STA-real"], 2) == [
        "t", "masks", "generate", "--whole-requests", "--families", "Q64K64", "STA-real", "--split", "evaluation",
        "--cases-per-family", "2", "--out", "D"]


def test_report_corpus_geomeans():
    doc = example_doc()
    for i, k in enumerate((1.0, 4.0)):
        name = f"corpus-eval:Q64K64:s:c01_{i:04d}"
        doc["workloads"].append({"name": name, "group": "corpus", "family": "Q64K64", "n": 1000, "heads": 40,
                                 "head_dim": 128, "block_q": 64, "block_kv": 64, "density": 0.1,
                                 "active_pairs": 10 ** 9, "recipe": "example", "mask_seed": i, "qkv_seed": 3})
        for s in schema.SYSTEMS:
            ms = k * (2.0 if s == "flex" else 1.0)
            doc["rows"].append(schema.row(name, s, kernel_ms=ms, request_ms=ms, first_call_ms=1.0,
                                          tflops=metrics.tflops(10 ** 9, 128, ms), rel_l2=1e-3))
    (g,) = report.corpus_geomeans(doc)
    assert g["family"] == "Q64K64" and g["requests"] == 2 and g["heads"] == [40]
    assert g["kernel_flex"] == pytest.approx(2.0) and g["n_kernel_flex"] == 2
    assert g["tflops_tessera"] == pytest.approx(metrics.tflops(10 ** 9, 128, 2.0))  # geomean of 1 ms and 4 ms
    assert "corpus-eval: whole requests, per family" in report.markdown(doc)


def test_whole_requests_from_the_command_line(tmp_path):
    """With a built `tessera` (build/*/bin): the harness reads what `masks generate --whole-requests` writes."""
    exe = CR.find_tessera_bin(W.REPO)
    if exe is None:
        pytest.skip("no tessera binary under build/")
    import subprocess

    out = str(tmp_path / "req")
    p = subprocess.run([exe, "masks", "generate", "--small", "--whole-requests", "--families", "Q64K64-HD",
                        "STA-real", "--cases-per-family", "1", "--out", out], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    ws = CR.corpus_workloads(out, W.Workload)
    assert sorted(w.family for w in ws) == ["Q64K64-HD", "STA-real"]
    assert {w.family: w.heads for w in ws}["STA-real"] == 24 and all(w.heads in (24, 40) for w in ws)
    for w in ws:
        m = w.mask()
        assert m.shape == (w.heads, w.n_qb, w.n_kvb) and m.any()


# ------------------------------------------------------------------------------------------------ generic masks
import generic_masks as G  # noqa: E402  (bench/generic_masks.py: the plan table's generic training masks)
from peers.corpus_requests import read_mask_file  # noqa: E402


@pytest.mark.parametrize("bq,bkv", [(128, 64), (16, 16), (64, 32)])
def test_generic_topk_rows_hold_exactly_k_blocks_near_the_diagonal(bq, bkv):
    n_qb = 25600 // bq  # 25,600 tokens: the band (320-2,880 tokens wide) is narrow against the row
    n_kvb = 25600 // bkv
    m = G.topk_field(3, n_qb, n_kvb, bq, bkv, 0.1, np.random.default_rng(5))
    k = int(round(0.1 * n_kvb))
    assert m.shape == (3, n_qb, n_kvb) and (m.sum(-1) == k).all()
    # the band term pulls the chosen blocks toward the diagonal: closer on average than all blocks of a row are
    dist = np.abs((np.arange(n_qb)[:, None] + 0.5) * bq / bkv - 0.5 - np.arange(n_kvb)[None, :])
    assert dist[None].repeat(3, 0)[m].mean() < 0.6 * dist.mean()


def test_generic_masks_files_round_trip_deterministic_and_apart_from_the_scoreboard(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert G.main(["--out", str(a), "--families", "Q128K64,Q64K64-HD"]) == 0
    assert G.main(["--out", str(b), "--families", "Q64K64-HD,Q128K64"]) == 0  # order of --families: same files
    files = sorted(os.listdir(a))
    assert files == sorted(os.listdir(b)) and len(files) == 2 * len(G.RECIPES) * len(G.REQUESTS)
    scoreboard_seeds = {100 + i for i in range(len(W.FAMILIES))} | {0, 1, 2, 3}
    seen = set()
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
        meta, dense = read_mask_file(str(a / f))
        fam, recipe, k = f[:-len(".safetensors")].split("__")
        split, n, heads, factor = G.REQUESTS[int(k[1:])]
        _, bq, bkv, dens = next(x for x in W.FAMILIES if x[0] == fam)
        assert dense.shape == (heads, -(-n // bq), -(-n // bkv))
        assert meta["split"] == split and meta["family"] == fam and meta["source_id"] == f"generic-{recipe}"
        assert meta["kind"] == "synthetic" and int(meta["block_q"]) == bq and int(meta["block_kv"]) == bkv
        assert abs(dense.mean() - dens * factor) < 0.25 * dens * factor
        assert int(meta["seed"]) not in scoreboard_seeds
        seen.add((meta["source_id"], meta["chunk"]))  # one request (cross-validation group) per file
    assert len(seen) == len(files)


def test_generic_masks_reject_an_unknown_family(tmp_path, capsys):
    with pytest.raises(SystemExit):
        G.main(["--out", str(tmp_path), "--families", "Q64K64,Q99K99"])
    assert "Q99K99" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ A0/A1/A2 ablation
from peers import ablation as AB  # noqa: E402


def test_ablation_direct_plan_is_the_first_direct_mapping_in_list_order():
    plans = ["sm90a.wgmma.bf16.d128.q64c2.kv64d.g1.tasc.split1.s2.w12",
             "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split2.s2.w4",
             "sm90a.wgmma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w8",
             "sm90a.mma.bf16.d128.q64d.kv64p2.g1.tasc.split1.s2.w4"]
    assert AB.direct_plan(plans, 64, 64) == plans[1]
    assert AB.direct_plan(plans, 128, 64) is None
    assert AB.direct_plan(["sm90a.mma.bf16.d128.q16d.kv16d.g1.tasc.split1.s2.w1"], 16, 16).endswith("w1")
    assert AB.direct_plan(["sm90a.mma.bf16.d128.q16d.kv160d.g1.tasc.split1.s2.w1"], 16, 16) is None


def test_ablation_baseline_falls_back_to_the_least_transformed_plan():
    direct = "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4"
    assert AB.baseline_plan([direct], 64, 64) == (direct, "")
    # 32 x 16: no such tile. q32r2.kv16d (ranks 1 + 0) beats q32d.kv16p4 (0 + 3) and q32c2.kv16p8 (2 + 3); of its two
    # equal entries, the first in list order
    plans = ["sm90a.wgmma.bf16.d128.q32c2.kv16p8.g1.tasc.split1.s1.w8",
             "sm90a.wgmma.bf16.d128.q32d.kv16p4.g1.tasc.split1.s2.w8",
             "sm90a.mma.bf16.d128.q32r2.kv16d.g1.tasc.split2.s2.w1",
             "sm90a.mma.bf16.d128.q32r2.kv16d.g1.tasc.split1.s2.w1"]
    plan, note = AB.baseline_plan(plans, 32, 16)
    assert plan == plans[2] and "no Direct plan" in note and "q32r2.kv16d" in note
    # without any Refined/Direct pair: the lowest rank sum (d + p = 3 < c + p = 5)
    plan, _ = AB.baseline_plan(plans[:2], 32, 16)
    assert plan == plans[1]
    # larger tile on equal ranks: q32d.kv16p8 (32 x 128) over q32d.kv16p4 (32 x 64)
    p8 = "sm90a.wgmma.bf16.d128.q32d.kv16p8.g1.tasc.split1.s1.w8"
    assert AB.baseline_plan([plans[1], p8], 32, 16)[0] == p8
    assert AB.baseline_plan(["garbage", "sm90a.mma.bf16.d128.q16d.kv16d.g1.tasc.split1.s2.w1"], 32, 16) == \
        (None, "no eligible plan parses")


def test_ablation_summary_medians_speedups_and_markdown():
    rows = []
    for fam, a0, a2 in (("Q64K64", 2.0, 1.0), ("Q16K16", 8.0, 2.0)):
        for r, jitter in enumerate((1.0, 1.1, 0.9)):
            for s, k in (("A0", a0), ("A1", a2), ("A2", a2)):
                cold = (100.0 if s == "A1" else 3.0) * jitter
                rows.append({"family": fam, "request": f"{fam}#{r}", "system": s, "cold_ms": cold,
                             "warm_ms": k * jitter, "amortised4_ms": AB.amortised(cold, k * jitter),
                             "kernel_ms": k * jitter})
    rows.append({"family": "Q64K64", "request": "Q64K64#3", "system": "A0", "error": "no Direct plan"})
    s = AB.summarize(rows)
    assert s["Q64K64"]["A0"]["requests"] == 3 and s["Q64K64"]["A2"]["kernel_ms"] == pytest.approx(1.0)
    assert s["Q64K64"]["A2"]["speedup_vs_A0"]["kernel_ms"] == pytest.approx(2.0)
    assert s["Q16K16"]["A2"]["speedup_vs_A0"]["kernel_ms"] == pytest.approx(4.0)
    assert s["all"]["A2"]["speedup_vs_A0"]["kernel_ms"] == pytest.approx(math.sqrt(8.0))
    assert s["all"]["A1"]["speedup_vs_A0"]["cold_ms"] == pytest.approx(0.03)
    assert AB.amortised(10.0, 2.0) == pytest.approx(4.0)
    md = AB.markdown(s, {"revision": "r", "gpu": "g", "date": "d", "command": "c"})
    assert "| Q64K64 | 3 |" in md and "| A2 |" in md and "2.00x" in md


def test_ablation_masks_are_new_draws_and_bad_arguments_are_refused(tmp_path):
    ws = AB.workloads(["Q64K64", "Q128K64"], 2)
    assert [w.name for w in ws] == ["Q64K64#0", "Q64K64#1", "Q128K64#0", "Q128K64#1"]
    seeds = {w.mask_seed for w in ws}
    assert len(seeds) == 4 and not seeds & ({100 + i for i in range(len(W.FAMILIES))} | set(range(1000, 2000)))
    m = ws[2].mask()
    assert m.shape == (AB.HEADS, 256, 512) and abs(m.mean() - 0.097) < 0.01
    assert not np.array_equal(ws[0].mask(), ws[1].mask())
    for bad in (["--families", "Q64K64,Q9"], ["--requests", "0"], ["--seconds", "0"]):
        with pytest.raises(SystemExit):
            AB.parse_args(["--out", str(tmp_path)] + bad)


# ------------------------------------------------------------------------------------------------ interleaved timing
def test_interleaved_ms_shuffles_the_order_and_primes_before_each_timed_call():
    torch = pytest.importorskip("torch")
    from peers import gpu

    log = []
    fns = [lambda i=i: log.append(("call", i)) for i in range(3)]
    primes = [None, lambda: log.append(("prime", 1)), None]
    t = gpu.Timer(torch.device("cpu"))
    ms = t.interleaved_ms(fns, rounds=3, primes=primes)
    assert len(ms) == 3 and all(m >= 0 for m in ms)
    # one warm-up call each, primed as the timed calls are (a FlashInfer form must plan again before it runs)
    assert log[:4] == [("call", 0), ("prime", 1), ("call", 1), ("call", 2)]
    rounds = log[4:]
    order = [i for kind, i in rounds if kind == "call"]
    import random
    want = []
    for r in range(3):  # a permutation per round, seeded by the round: a rerun times in the same order
        o = [0, 1, 2]
        random.Random(r).shuffle(o)
        want += o
    assert order == want
    for k, entry in enumerate(rounds):  # callable 1 is primed right before each of its timed calls
        if entry == ("call", 1):
            assert rounds[k - 1] == ("prime", 1)
    assert rounds.count(("prime", 1)) == 3
    with pytest.raises(ValueError, match="primes"):
        t.interleaved_ms(fns, rounds=1, primes=[None])
    # over 30 rounds every callable follows more than one other callable (a rotation kept its predecessor fixed)
    log.clear()
    t.interleaved_ms(fns, rounds=30)
    calls = [i for kind, i in log[3:] if kind == "call"]
    for i in range(3):
        before = {calls[k - 1] for k in range(1, len(calls)) if calls[k] == i}
        assert len(before - {i}) == 2, (i, before)


def test_interleave_replaces_kernel_ms_keeps_the_first_and_respects_the_budget(tmp_path, monkeypatch):
    from peers import corpus_requests, run

    monkeypatch.setattr(corpus_requests, "find_tessera_bin", lambda repo, explicit=None: None)
    a = run.parse(["--out", str(tmp_path), "--workloads", "Q64K64", "--systems", "tessera,flex", "--revision", "r1"])
    assert a.interleave_rounds == 10
    with pytest.raises(SystemExit):
        run.parse(["--out", str(tmp_path), "--interleave-rounds", "-1"])
    r = run.Run(a)
    w = r.workloads[0]
    stats = {"active_pairs": 1_000_000_000}
    for s, ms in (("tessera", 2.0), ("flex", 4.0)):
        r.put(schema.row(w.name, s, kernel_ms=ms, tflops=metrics.tflops(stats["active_pairs"], w.head_dim, ms),
                         plan="sm90a.wgmma.x" if s == "tessera" else None))

    class StubTimer:
        def __init__(self):
            self.calls = []

        def interleaved_ms(self, fns, rounds, primes=None):
            self.calls.append((len(fns), rounds, [p is not None for p in primes]))
            return [2.2, 3.9]

    tm = StubTimer()
    fns = {"tessera": (lambda: None, lambda: None), "flex": (lambda: None, None)}
    run.interleave(r, w, stats, tm, fns, 10)
    assert tm.calls == [(2, 10, [True, False])]
    rows = schema.rows_by(json.loads((tmp_path / "latest.json").read_text()))
    t, f = rows[(w.name, "tessera")], rows[(w.name, "flex")]
    assert (t["kernel_ms"], t["kernel_ms_alone"]) == (2.2, 2.0) and (f["kernel_ms"], f["kernel_ms_alone"]) == (3.9, 4.0)
    assert t["tflops"] == pytest.approx(metrics.tflops(stats["active_pairs"], w.head_dim, 2.2))
    assert schema.validate(json.loads((tmp_path / "latest.json").read_text())) == []
    r.deadline = 0.0  # no budget left: the rows stay as measured, with a note
    run.interleave(r, w, stats, tm, fns, 10)
    assert len(tm.calls) == 1
    assert "not interleaved (time budget)" in r.rows[(w.name, "flex")]["note"]


def test_run_refuses_bad_numbers_and_writes_nothing_without_its_gpu(tmp_path, monkeypatch, capsys):
    from peers import run

    for bad in (["--seconds", "0"], ["--request-reps", "-2"], ["--warmup", "-1"], ["--sweep-seconds", "-1"],
                ["--sweep-max-plans", "-1"], ["--flex-candidates", "-1"], ["--fi-jit-timeout", "0"],
                ["--scale", "0"], ["--scale", "2"], ["--device", "tpu"], ["--fi-forms", "bogus"],
                ["--sta-case", "abc"], ["--sta-case", "20"], ["--sta-case", "99_99"], ["--workloads", ""],
                ["--corpus-dir", str(tmp_path / "none")], ["--tessera-module-dir", str(tmp_path / "none")]):
        with pytest.raises(SystemExit):
            run.parse(["--out", str(tmp_path)] + bad)
        assert bad[0] in capsys.readouterr().err
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "peers"
    assert run.main(["--out", str(out), "--workloads", "Q16K16"]) == 1
    assert "no CUDA device" in capsys.readouterr().err and not out.exists()
    # --out that is a file: a message naming it, nothing measured (the CPU smoke path, stopped before any workload)
    f = tmp_path / "a_file"
    f.write_text("x")
    assert run.main(["--out", str(f), "--device", "cpu", "--workloads", "Q16K16"]) == 2
    assert "--out" in capsys.readouterr().err and f.read_text() == "x"


# ------------------------------------------------------------------------------------------------ FlashInfer forms
def test_flashinfer_forms_plan_again_before_the_interleaved_runs():
    """Every FlashInfer form plans into the same workspace buffers, so the picked form's run() is only valid right
    after its own plan(). A fake wrapper pair that faults like the H200 did (session 17: an illegal address) when run
    on another wrapper's plan: the picked form's callable fails after the other form planned, and its prime makes
    the interleaved re-timing valid."""
    torch = pytest.importorskip("torch")
    from peers import gpu, systems

    owner = {}  # the shared int workspace -> the wrapper whose plan it holds

    class Wrapper:
        def __init__(self, float_ws, backend="auto"):
            self._backend, self.int_ws = backend, float_ws

        def reset_workspace_buffer(self, float_ws, int_ws):
            self.int_ws = int_ws

        def plan(self, *args, **kwargs):
            owner[id(self.int_ws)] = self

        def run(self, q, k, v):
            if owner.get(id(self.int_ws)) is not self:
                raise RuntimeError("illegal address: run() on another wrapper's plan")
            return torch.zeros_like(q)

    class Ref:
        def rel_l2(self, o):
            return 0.0

    fi = object.__new__(systems.FlashInfer)
    fi.BSR = fi.VAR = Wrapper
    fi.device, fi.jit = torch.device("cpu"), {"jit_ms": None}
    fi.timer = gpu.Timer(torch.device("cpu"))
    fi.float_ws, fi.int_ws = torch.empty(16, dtype=torch.uint8), torch.empty(16, dtype=torch.uint8)
    w = W.Workload("Q64K64", "families", n=256, heads=2, head_dim=64, block_q=64, block_kv=64, mask_seed=1,
                   qkv_seed=2, recipe="test")
    mask = torch.ones(2, 4, 4, dtype=torch.bool)
    hnd = tuple(torch.zeros(2, 256, 64, dtype=torch.bfloat16) for _ in range(3))
    case = systems.Case(w=w, mask=mask, stats={"active_pairs": 2 * 256 * 256}, hnd=hnd, ref=Ref())
    row = fi.run(case, ["fold", "variable"])
    fn, prime = row.pop("_kernel_fn"), row.pop("_prime_fn")
    assert row["form"] in ("fold", "variable") and fn is not None and prime is not None
    if row["form"] == "fold":  # the variable form planned after the picked one: its run is stale now
        with pytest.raises(RuntimeError, match="illegal address"):
            fn()
    other = Wrapper(fi.float_ws)
    other.reset_workspace_buffer(fi.float_ws, fi.int_ws)
    other.plan()  # e.g. another workload's FlashInfer call in between
    with pytest.raises(RuntimeError, match="illegal address"):
        fn()
    ms = fi.timer.interleaved_ms([fn], rounds=3, primes=[prime])
    assert len(ms) == 1 and ms[0] >= 0


# ------------------------------------------------------------------------------------------------ Flex, ragged N
def _flex_case(n, bq, bk, heads=2, d=16, seed=0):
    """A small request on the CPU: a random [H, n_qb, n_kvb] mask (density ~0.4; kv block 0 in every row, so no row
    is empty; the ragged kv block listed in the even rows only), q, k, v float32 [H, N, D] and the scoreboard's fp32
    reference rows. Returns (torch, systems, gpu, case, flex) with flex = a Flex on a CPU Timer (1 rep each)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch.nn.attention.flex_attention")
    from peers import gpu, systems

    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(heads, -(-n // bq), -(-n // bk), generator=g) < 0.4
    mask[:, :, 0] = True
    mask[:, 0::2, -1], mask[:, 1::2, -1] = True, False
    hnd = tuple(torch.randn(heads, n, d, generator=g) for _ in range(3))
    w = W.Workload("ragged", "families", n=n, heads=heads, head_dim=d, block_q=bq, block_kv=bk, mask_seed=1,
                   qkv_seed=2, recipe="test")
    ref = gpu.Reference(*hnd, mask, bq, bk, heads=list(range(heads)))
    case = systems.Case(w=w, mask=mask, stats={"active_pairs": 1}, hnd=hnd, ref=ref)
    timer = gpu.Timer(torch.device("cpu"), warm=0, reps=1, req_warm=0, req_reps=2)
    return torch, systems, gpu, case, systems.Flex(timer)


def _flex_reference(torch, case):
    """float64 masked SDPA of the case: O [H, N, D]."""
    w = case.w
    tok = torch.arange(w.n)
    allowed = case.mask[:, tok // w.block_q][:, :, tok // w.block_kv]
    q, k, v = (x.double() for x in case.hnd)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


def _rel_err(a, b):
    return float((a.double() - b).norm() / b.norm())


def test_flex_candidates_offer_the_padded_form_only_for_a_ragged_n():
    pytest.importorskip("torch")
    from peers.systems import Flex

    # whole blocks on both sides: the list as before, no padded form
    b64, b32 = {"BLOCK_M": 64, "BLOCK_N": 64}, {"BLOCK_M": 64, "BLOCK_N": 32}
    assert Flex.candidates(64, 64, 32768) == [(b64, "full"), (b32, "full"), (b64, "partial")]
    assert Flex.candidates(128, 128, 115200) == [({}, "full"), ({"BLOCK_M": 128, "BLOCK_N": 128}, "full"),
                                                 ({"BLOCK_M": 128, "BLOCK_N": 64}, "full"), ({}, "partial")]
    assert Flex.candidates(384, 384, 115200)[0] == ({}, "full")
    assert Flex.candidates(32, 16, 256) == [({"BLOCK_M": 32, "BLOCK_N": 16}, "full"), ({"BLOCK_M": 32, "BLOCK_N": 16},
                                                                                        "partial")]
    assert all(f != "padded" for n in (32768, 64 * 1182) for _, f in Flex.candidates(64, 64, n))
    # ragged (Wan 720p; a 16-token block pair; N a multiple of B_KV but not of B_Q), or whole blocks but not whole
    # 128-row kernel tiles (3 x 64): second, after the first full one
    for bq, bk, n, n_pad in ((64, 64, 75600, 75648), (32, 16, 200, 256), (128, 64, 75584, 75648),
                             (16, 64, 200, 256), (384, 384, 115456, 115584), (64, 64, 192, 256)):
        c = Flex.candidates(bq, bk, n)
        assert [f for _, f in c].count("padded") == 1 and c[1] == (c[0][0], "padded") and c[0][1] == "full", c
        assert Flex.padded_len(bq, bk, n) == n_pad and n_pad % bq == 0 and n_pad % bk == 0 and n_pad % 128 == 0
        # the rest of the list as for a whole number of blocks
        assert c[:1] + c[2:] == Flex.candidates(bq, bk, n_pad)
    assert Flex.padded_len(64, 64, 75648) == 75648


def test_flex_padded_block_mask_lists_full_blocks_and_the_ragged_kv_block_as_partial():
    torch, systems, _, _, flex = _flex_case(200, 16, 64)
    # N = 200, B_Q = 16, B_KV = 64: N' = 256; 13 query blocks -> 16 (3 empty rows), 4 kv blocks (the last one 8
    # tokens, 192..199)
    mask = torch.zeros(2, 13, 4, dtype=torch.bool)
    mask[0, 0, [0, 3]] = True          # the ragged block with a full one
    mask[0, 1, 3] = True               # the ragged block alone
    mask[0, 2, [2, 1]] = True          # no ragged block
    mask[1, 12, :] = True              # every block, in the last real query block
    bm = flex.block_mask(mask, 16, 64, 200, "padded")
    assert bm.seq_lengths == (256, 256) and bm.BLOCK_SIZE == (16, 64)
    assert tuple(bm.kv_indices.shape) == (1, 2, 16, 4) and tuple(bm.full_kv_indices.shape) == (1, 2, 16, 4)
    assert bm.full_kv_num_blocks[0, 0, :4].tolist() == [1, 0, 2, 0]
    assert bm.kv_num_blocks[0, 0, :4].tolist() == [1, 1, 0, 0]
    assert bm.full_kv_indices[0, 0, 0, :1].tolist() == [0] and bm.full_kv_indices[0, 0, 2, :2].tolist() == [1, 2]
    assert int(bm.kv_indices[0, 0, 0, 0]) == 3 and int(bm.kv_indices[0, 0, 1, 0]) == 3
    assert int(bm.full_kv_num_blocks[0, 1, 12]) == 3 and int(bm.kv_num_blocks[0, 1, 12]) == 1
    assert bm.full_kv_indices[0, 1, 12, :3].tolist() == [0, 1, 2] and int(bm.kv_indices[0, 1, 12, 0]) == 3
    # the padding's query-block rows list nothing; totals: every active block once
    assert int(bm.full_kv_num_blocks[..., 13:].sum()) == 0 and int(bm.kv_num_blocks[..., 13:].sum()) == 0
    assert int(bm.full_kv_num_blocks.sum() + bm.kv_num_blocks.sum()) == int(mask.sum()) == 9
    # the mask_mod keeps the real keys only, and is the same function for every request of one N (no recompile)
    assert bool(bm.mask_mod(0, 0, torch.tensor(0), torch.tensor(199)))
    assert not bool(bm.mask_mod(0, 0, torch.tensor(0), torch.tensor(200)))
    assert flex.block_mask(mask, 16, 64, 200, "padded").mask_mod is bm.mask_mod
    assert flex.kv_below(201) is not bm.mask_mod and flex.kv_below(200) is bm.mask_mod

    # kv columns widened: B_Q = 64, B_KV = 16 -> 13 kv blocks (the last 8 tokens) of 16 in N' = 256
    m2 = torch.zeros(1, 4, 13, dtype=torch.bool)
    m2[0, 3, [5, 12]] = True
    bm = flex.block_mask(m2, 64, 16, 200, "padded")
    assert bm.seq_lengths == (256, 256) and tuple(bm.kv_indices.shape) == (1, 1, 4, 16)
    assert int(bm.full_kv_num_blocks[0, 0, 3]) == 1 and int(bm.full_kv_indices[0, 0, 3, 0]) == 5
    assert int(bm.kv_num_blocks[0, 0, 3]) == 1 and int(bm.kv_indices[0, 0, 3, 0]) == 12

    # N a multiple of B_KV, not of B_Q (192 = 3 x 64 = 1.5 x 128): only query rows padded, every block full
    m3 = torch.ones(1, 2, 3, dtype=torch.bool)
    bm = flex.block_mask(m3, 128, 64, 192, "padded")
    assert bm.seq_lengths == (256, 256) and int(bm.kv_num_blocks.sum()) == 0
    assert bm.full_kv_num_blocks[0, 0].tolist() == [3, 3] and tuple(bm.full_kv_indices.shape) == (1, 1, 2, 4)


@pytest.mark.parametrize("bq,bk,block_n", [(32, 16, 16), (32, 64, 64), (32, 64, 32), (16, 64, 64), (64, 16, 16)])
def test_flex_padded_form_computes_the_masked_attention(bq, bk, block_n):
    """Through the emulated Triton kernel (flex_emulation.py; keys past N' read as NaN when N' % 128 == 0, as the
    kernel would read past the tensors): the padded form's O, sliced to N rows, equals the float64 masked SDPA. The
    same lists with the ragged block listed as full (the padded zero keys counted) must not."""
    from flex_emulation import flex_triton_emulation

    n = 200
    torch, systems, _, case, flex = _flex_case(n, bq, bk)
    n_pad = systems.Flex.padded_len(bq, bk, n)
    xs = flex.inputs(case, "padded")
    assert all(tuple(x.shape) == (1, 2, n_pad, 16) for x in xs)
    assert all(bool((x[:, :, n:] == 0).all()) and torch.equal(x[0, :, :n], y) for x, y in zip(xs, case.hnd))
    bm = flex.block_mask(case.mask, bq, bk, n, "padded")
    ref = _flex_reference(torch, case)
    o = flex_triton_emulation(*xs, bm, block_n=block_n)[0, :, :n]
    assert bool(torch.isfinite(o).all()) and _rel_err(o, ref) < 1e-12
    # wrong: the ragged kv block full (no mask_mod), same N' and lists
    wide = torch.zeros(2, n_pad // bq, n_pad // bk, dtype=torch.bool)
    wide[:, :case.mask.shape[1], :case.mask.shape[2]] = case.mask
    wrong = flex.block_mask(wide, bq, bk, n_pad, "full")
    assert wrong.seq_lengths == bm.seq_lengths
    assert _rel_err(flex_triton_emulation(*xs, wrong, block_n=block_n)[0, :, :n], ref) > 1e-2


def test_flex_run_pads_once_outside_the_kernel_and_reports_the_padding():
    """Flex.run on the CPU with the emulated kernel as the compiled function: the screen picks the padded form (the
    unpadded call made slower, as the bounds checks make it on the GPU); the kernel callable reuses one padded copy,
    each request pads and builds its BlockMask anew; O goes to the checks sliced to N rows; form and note say so.
    The timed calls read a virtual clock (5 ms unpadded, 1 ms padded): with a sleep on the real clock the screen's
    choice followed the machine's load (it failed once in CI while a build ran beside it)."""
    from flex_emulation import flex_triton_emulation

    n, bq, bk = 200, 32, 64
    torch, systems, _, case, flex = _flex_case(n, bq, bk, seed=3)
    calls = []
    last_ms = [0.0]

    def compiled(opts):
        def fn(q, k, v, bm):
            calls.append((q, bm))
            last_ms[0] = 5.0 if q.shape[2] % 128 else 1.0
            return flex_triton_emulation(q, k, v, bm, block_n=opts["BLOCK_N"]).to(q.dtype)
        return fn

    def timed(fn):  # Timer._timed on the virtual clock: one call, its cost
        fn()
        return last_ms[0]

    flex.compiled = compiled
    flex.timer._timed = timed
    ref = _flex_reference(torch, case)
    case.tessera_out = ref.float()  # rel_l2_vs_tessera compares whole [H, N, D] outputs: O must be N rows
    row = flex.run(case, 2)
    assert [c["form"] for c in row["candidates"]] == ["full", "padded"]
    assert row["form"] == ("BLOCK_M=32, BLOCK_N=64; full blocks, N = 200 padded to 256 tokens (zero rows); the tail "
                           "kv block 3 partial with mask_mod kv_idx < N")
    assert "padded to 256 tokens" in row["note"] and "FAILS" not in row["note"]
    assert row["rel_l2"] < 1e-5 and row["rel_l2_vs_tessera"] < 1e-6
    # calls: full (1 first + 1 warm-up + 3 screened), padded (1 + 1 + 3), 2 requests, 1 timed kernel call, the O call
    assert len(calls) == 14
    padded = calls[5:]
    q0 = padded[0][0]
    assert q0.shape[2] == 256 and all(q.shape[2] == 256 and bm.seq_lengths == (256, 256) for q, bm in padded)
    assert all(q is q0 for q, _ in padded[:5]) and padded[12 - 5][0] is q0 and padded[13 - 5][0] is q0
    req = padded[5:7]
    assert all(q is not q0 for q, _ in req) and req[0][0] is not req[1][0] and req[0][1] is not req[1][1]
    kernel_fn = row["_kernel_fn"]
    kernel_fn()
    assert calls[-1][0] is q0 and calls[-1][1] is calls[-2][1]


def test_flex_padded_form_with_the_real_kernel_on_the_cpu():
    """The padded form through torch.compile(flex_attention) on the CPU (inductor's C++ kernel, not the GPU's
    Triton one), B_KV = 16 with a 8-token ragged block: the row's O matches the masked attention."""
    n, bq, bk = 200, 32, 16
    torch, systems, _, case, flex = _flex_case(n, bq, bk, seed=5)
    flex.candidates = lambda a, b, c: [x for x in systems.Flex.candidates(a, b, c) if x[1] == "padded"]
    case.tessera_out = _flex_reference(torch, case).float()
    try:
        row = flex.run(case, 1)
    except RuntimeError as ex:  # no C++ toolchain for inductor here
        if "Compile" in str(ex) or "Inductor" in str(ex):
            pytest.skip(f"FlexAttention does not compile on this CPU: {str(ex)[:120]}")
        raise
    assert "padded to 256 tokens" in row["form"] and row["rel_l2_vs_tessera"] < 1e-5 and row["rel_l2"] < 1e-5
