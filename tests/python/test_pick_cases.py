"""bench/pick_cases.py (case ids for `tessera profile --case-ids` from `tessera profile --list-features` lines): the
two ends of longest_row_share * 132 per key and split, most extreme first, --per-key, --exclude, --only-single, stdin
and a malformed line. Stdlib only; made-up feature lines, no binary."""
import gzip
import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench",
                      "pick_cases.py")


def line(case, sms, split="profile", key="sm90a.bf16.d128.q64.kv64", grid_rows=264):
    """A --list-features line whose longest_row_share * 132 is `sms` (row_imbalance = sms * grid_rows / 132)."""
    return json.dumps({"case": case, "split": split, "key": key,
                       "features": {"row_imbalance": sms * grid_rows / 132 if grid_rows else 3.0,
                                    "grid_rows": grid_rows}})


def pick(tmp_path, lines, *args, stdin=False):
    path = tmp_path / "f.jsonl"
    path.write_text("".join(x + "\n" for x in lines))
    p = subprocess.run([sys.executable, SCRIPT, *([] if stdin else [str(path)]), *args], capture_output=True,
                       text=True, timeout=60, input=path.read_text() if stdin else None)
    return p.returncode, p.stdout.splitlines(), p.stderr


def test_ends_per_key_and_split(tmp_path):
    lines = [line("F/s/0", 0.5), line("F/s/1", 0.2), line("F/s/2", 1.5), line("F/s/3", 3.0), line("F/s/4", 9.0),
             line("F/s/5", 0.0, grid_rows=0), line("F/s/6", 5.0, split="eval"), line("F/s/6", 5.0, split="eval"),  # once
             line("G/s/0", 0.1, key="sm90a.bf16.d128.q16.kv16"), line("F/s/7", 2.0, split="eval")]
    rc, ids, err = pick(tmp_path, lines)
    # the q16 key first; profile split: lows 5 (grid_rows 0), 1, 0 and highs 4, 3 alternate; then eval: 6 (not 7: 2.0)
    assert rc == 0 and ids == ["G/s/0", "F/s/5", "F/s/4", "F/s/1", "F/s/3", "F/s/0", "F/s/6"], err
    rc, ids, _ = pick(tmp_path, lines, "--per-key", "1", "--low", "0.3", "--high", "4")
    assert rc == 0 and ids == ["G/s/0", "F/s/5", "F/s/4", "F/s/6"]
    rc, ids, _ = pick(tmp_path, lines, "--per-key", "1", stdin=True)
    assert rc == 0 and ids == ["G/s/0", "F/s/5", "F/s/4", "F/s/6"]


def test_exclude_and_only_single(tmp_path):
    lines = [line("F/s/0", 0.5), line("F/s/0/whole", 0.4), line("F/s/1", 0.3), line("F/s/2", 8.0)]
    done = tmp_path / "done.jsonl.gz"
    with gzip.open(done, "wt") as f:
        f.write(json.dumps({"case": "F/s/1", "plan": "p"}) + "\n\n" + json.dumps({"case": "F/s/1", "plan": "q"}) + "\n")
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"case": "F/s/2"}) + "\n")
    rc, ids, err = pick(tmp_path, lines, "--exclude", str(done), str(more))
    assert rc == 0 and ids == ["F/s/0/whole", "F/s/0"], err
    rc, ids, _ = pick(tmp_path, lines, "--only-single")
    assert rc == 0 and ids == ["F/s/1", "F/s/2", "F/s/0"]


def test_bad_input(tmp_path):
    rc, ids, err = pick(tmp_path, [line("F/s/0", 0.5), "{not json"])
    assert rc != 0 and ids == [] and "line 2" in err
    rc, _, err = pick(tmp_path, [json.dumps({"case": "F/s/0", "split": "profile", "key": "k", "features": {}})])
    assert rc != 0 and "line 1" in err and "grid_rows" in err
    rc, _, err = pick(tmp_path, [line("F/s/0", 0.5)], "--low", "3", "--high", "2")
    assert rc != 0 and "--low" in err


def test_unreadable_file_is_a_message_not_a_traceback(tmp_path):
    for path in (tmp_path / "missing.jsonl", tmp_path):
        p = subprocess.run([sys.executable, SCRIPT, str(path)], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and "cannot be read" in p.stderr and "Traceback" not in p.stderr
