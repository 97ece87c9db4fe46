"""bench/compile_embedded_table.sh's command line: -h / --help print the header's usage (exit 0, nothing written);
extra record files and LOGS relative to the caller's directory, not the repository root; a directory or missing
record file named as such (exit 1, before any merge). One full run over the listed inputs plus a relative extra file
with a stub TESSERA that writes nothing (the embedded table untouched). Needs bash and GNU realpath; no binary."""
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "bench", "compile_embedded_table.sh")
TABLE = os.path.join(REPO, "src", "core", "plan_tables", "sm90a.json")

if shutil.which("bash") is None or shutil.which("realpath") is None:
    pytest.skip("needs bash and realpath", allow_module_level=True)


def run(cwd, *args, **env):
    return subprocess.run(["bash", SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env=dict(os.environ, **env))


def test_help(tmp_path):
    for flag in ("-h", "--help"):
        p = run(tmp_path, flag, TESSERA="/nonexistent", LOGS="logs")
        assert p.returncode == 0 and p.stderr == "", p.stderr
        assert "Usage: [TESSERA=build/ci/bin/tessera] [LOGS=dir] bench/compile_embedded_table.sh" in p.stdout
        assert "merge.log, compile_table.log and eval_report.csv" in p.stdout and "set -e" not in p.stdout, p.stdout
    assert os.listdir(tmp_path) == []


def test_relative_paths_and_bad_record_files(tmp_path):
    logs = f"logs_test_compile_embedded_table_{os.getpid()}"  # would be made in the repository if resolved there
    (tmp_path / "recs").mkdir()
    here = os.path.realpath(tmp_path)
    try:
        for arg, want in [("recs", f"record file {here}/recs is a directory"),
                          ("missing.jsonl", f"record file {here}/missing.jsonl does not exist"),
                          ("", "an empty record file argument")]:
            p = run(tmp_path, arg, TESSERA="/bin/true", LOGS=logs)
            assert p.returncode == 1 and p.stderr == f"compile_embedded_table: {want}\n", p.stderr
        assert (tmp_path / logs).is_dir() and not os.path.exists(os.path.join(REPO, logs))
    finally:
        shutil.rmtree(os.path.join(REPO, logs), ignore_errors=True)


def test_run_with_a_relative_extra_file(tmp_path):
    stub = tmp_path / "stub_tessera"  # prints its arguments and the merged file's line count, writes nothing
    stub.write_text('#!/usr/bin/env bash\necho "stub $*"\necho "merged $(wc -l < "$3") lines"\n')
    stub.chmod(0o755)
    (tmp_path / "extra.jsonl").write_text('{"case": "test/extra/0", "plan": "p", "latency_us": 1.0}\n')
    before, here = open(TABLE, "rb").read(), os.path.realpath(tmp_path)
    p = run(tmp_path, "extra.jsonl", TESSERA=str(stub), LOGS="logs")
    assert p.returncode == 0, p.stderr
    assert f"stub compile-table --in {here}/logs/all.jsonl --out src/core/plan_tables/sm90a.json" in p.stdout
    merge_log = (tmp_path / "logs" / "merge.log").read_text()
    assert f"{here}/extra.jsonl 1 records; 0 older records replaced\n" in merge_log, merge_log
    assert sorted(os.listdir(tmp_path / "logs")) == ["compile_table.log", "merge.log"]  # all.jsonl removed
    assert open(TABLE, "rb").read() == before
