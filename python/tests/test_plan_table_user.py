"""User plan tables on the CPU path: records -> `tessera compile-table` -> tessera.load_plan_table -> selection uses
the table (a different plan than the embedded table's), and every bad table is a TesseraError naming the file.

Needs the command line (`TESSERA_CLI`, set by CTest) to compile the table; skips without it."""
import json
import os
import subprocess

import numpy as np
import pytest

import tessera

CLI = os.environ.get("TESSERA_CLI")
KEY = "sm90a.bf16.d128.q64.kv64"
EMBEDDED = os.path.join(os.path.dirname(__file__), "..", "..", "src", "core", "plan_tables", "sm90a.json")

pytestmark = pytest.mark.skipif(not CLI or not os.path.exists(CLI), reason="TESSERA_CLI (the tessera binary) not set")


def _request(seed=3):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((1, 256, 2, 128)).astype(np.float32) for _ in range(3))
    dense = rng.random((1, 2, 4, 4)) < 0.5
    dense[..., 0] = True
    return q, k, v, dense


def _record(case, plan, latency, split="profile", role=None):
    r = {"case": case, "source": case.split("/")[1], "split": split, "key": KEY,
         "features": {"batch_heads": 2, "seq_len": 256, "density": 0.5, "run_coverage": 0.5, "mean_run_length": 2,
                      "mean_row_active": 2, "row_imbalance": 1.5,
                      "grid_rows": 256, "active_blocks": 1024,
                      "coarsen_cost2": 1.2, "coarsen_cost4": 1.3, "coarsen_cost8": 1.4},
         "plan": plan, "latency_us": latency, "valid": True}
    if role:
        r["role"] = role
    return json.dumps(r)


@pytest.fixture
def user_table(tmp_path):
    """(path of a user table ranking a plan first that the embedded table does not choose, that plan, the embedded
    table's dispatch dict)."""
    tessera.load_plan_table(None)
    q, k, v, dense = _request()
    embedded_choice = tessera.explain(q, k, v, dense, 64)
    with open(EMBEDDED) as f:
        tree = next(t for t in json.load(f)["tables"] if t["key"] == KEY)
    base = tree["base_plan"]
    mine = base.replace(".split1.", ".split2.")  # the user table's first choice: neither the base plan nor embedded's
    assert mine != base and embedded_choice["plan_id"] not in (base, mine), embedded_choice["plan_id"]
    assert tessera.explain(q, k, v, dense, 64, plan_id=mine)["plan_id"] == mine  # eligible for the request
    lines = []
    for i, split in enumerate(["profile", "profile", "eval"]):
        lines += [_record(f"U/mine/{i}", mine, 10.0, split), _record(f"U/mine/{i}", base, 20.0, split, role="default"),
                  _record(f"U/mine/{i}", embedded_choice["plan_id"], 30.0, split)]
    records = tmp_path / "records.jsonl"
    records.write_text("".join(line + "\n" for line in lines))
    table = tmp_path / "table.json"
    p = subprocess.run([CLI, "compile-table", "--in", str(records), "--out", str(table), "--min-leaf", "1",
                        "--gpu-name", "test GPU"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    yield table, mine, embedded_choice
    tessera.load_plan_table(None)


def test_user_table_round_trip(user_table):
    table, base, embedded_choice = user_table
    assert embedded_choice["table_status"].startswith("embedded table for sm90a")
    info = tessera.load_plan_table(table)
    assert info["path"] == os.path.abspath(table) and info["arch"] == "sm90a" and info["keys"] == 1
    assert info["gpu_name"] == "test GPU" and tessera.plan_table() == info
    q, k, v, dense = _request()
    d = tessera.explain(q, k, v, dense, 64)
    assert d["plan_id"] == base and d["source"] == "table" and d["regime"] == KEY + "/leaf0"
    assert d["table_status"] == info["status"] and str(table) in d["table_status"]
    from conftest import reference_attention

    o = tessera.block_sparse_attention(q, k, v, dense, 64)
    ref, _ = reference_attention(q, k, v, dense, 64, 64)
    assert np.abs(o - ref).max() < 1e-5
    # A key the user table has no tree for: the documented default plan, never the embedded table's ranking.
    d32 = tessera.explain(q, k, v, np.ones((1, 2, 8, 8), dtype=bool), 32)
    assert d32["source"] == "default" and d32["table_status"] == info["status"]
    assert tessera.load_plan_table(None) is None and tessera.plan_table() is None
    d = tessera.explain(q, k, v, dense, 64)
    assert d["plan_id"] == embedded_choice["plan_id"] and d["table_status"].startswith("embedded table")


def _expect_table_error(path, code, *words):
    with pytest.raises(tessera.TesseraError) as e:
        tessera.load_plan_table(path)
    assert e.value.argument == "plan_table_path" and e.value.code == code, str(e.value)
    assert os.path.abspath(path) in str(e.value), str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_bad_user_tables_raise_naming_the_file(user_table, tmp_path):
    table, base, _ = user_table
    tessera.load_plan_table(table)
    good = json.loads(table.read_text())
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"format": "tessera-plan-table", "format_')
    _expect_table_error(corrupt, "format error")
    other_catalog = tmp_path / "other_catalog.json"
    other_catalog.write_text(json.dumps(dict(good, catalog_version="cat-not-this-build")))
    _expect_table_error(other_catalog, "format error", "catalog_version", "cat-not-this-build")
    other_format = tmp_path / "other_format.json"
    other_format.write_text(json.dumps(dict(good, format_version=99)))
    _expect_table_error(other_format, "format error", "format_version")
    bad_ranking = tmp_path / "bad_ranking.json"
    broken = json.loads(json.dumps(good))
    broken["tables"][0]["rankings"][0] = broken["tables"][0]["rankings"][0][:-1] + ["sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split2.s2.w4"]
    bad_ranking.write_text(json.dumps(broken))
    _expect_table_error(bad_ranking, "format error", "base plan")
    _expect_table_error(tmp_path / "missing.json", "io error")
    _expect_table_error(tmp_path, "io error", "directory")
    with pytest.raises(tessera.TesseraError) as e:
        tessera.load_plan_table(3)
    assert e.value.argument == "plan_table_path"
    # Every failure left the user table in use: no silent fallback.
    q, k, v, dense = _request()
    d = tessera.explain(q, k, v, dense, 64)
    assert d["plan_id"] == base and str(table) in d["table_status"]


def test_user_table_ranking_an_unknown_plan_id_raises_naming_the_file(user_table, tmp_path):
    """A table of this build's catalog version cannot rank an id this build does not know: an error, never skipped."""
    table, _, _ = user_table
    assert tessera.load_plan_table(table)["keys"] == 1  # the unmodified table loads
    broken = json.loads(table.read_text())
    broken["tables"][0]["rankings"][0][0] = "xyz"
    garbage = tmp_path / "garbage_id.json"
    garbage.write_text(json.dumps(broken))
    _expect_table_error(garbage, "format error", f"tree '{KEY}' leaf 0 ranks plan 'xyz', which does not parse")


def test_user_table_changed_on_disk_is_read_again(user_table):
    table, base, _ = user_table
    tessera.load_plan_table(table)
    good = table.read_text()
    table.write_text(json.dumps(dict(json.loads(good), catalog_version="cat-not-this-build")) + " " * 64)
    q, k, v, dense = _request()
    with pytest.raises(tessera.TesseraRuntimeError) as e:
        tessera.explain(q, k, v, dense, 64)
    assert e.value.argument == "plan_table_path" and str(table) in str(e.value)
    table.write_text(good)
    assert tessera.explain(q, k, v, dense, 64)["plan_id"] == base
