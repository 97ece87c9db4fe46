"""bench/pick_cases.py (case ids for `tessera profile --case-ids` from `tessera profile --list-features` lines): the
two ends of longest_row_share * 132 per key and split, most extreme first, --per-key, --exclude (one file per use),
--only-single, stdin; no case picked (exit 1, the reason on stderr); bad input (a malformed line, a field of the wrong
type, a bad .gz, bytes that are not UTF-8, non-finite --low / --high: one line naming file and line, exit 2) and a
closed stdout, never a traceback. Stdlib only; made-up feature lines, no binary."""
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
    rc, ids, err = pick(tmp_path, lines, "--exclude", str(done), "--exclude", str(more))
    assert rc == 0 and ids == ["F/s/0/whole", "F/s/0"], err
    # one file per --exclude: the features file after it stays a features file, not a second exclude file
    p = subprocess.run([sys.executable, SCRIPT, "--exclude", str(done), str(tmp_path / "f.jsonl")],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and p.stdout.splitlines() == ["F/s/0/whole", "F/s/2", "F/s/0"], p.stderr
    rc, ids, _ = pick(tmp_path, lines, "--only-single")
    assert rc == 0 and ids == ["F/s/1", "F/s/2", "F/s/0"]


def test_no_case_picked_says_why(tmp_path):
    lines = [line("F/s/0", 0.5), line("F/s/1", 3.0), line("F/s/1/whole", 3.0)]
    done = tmp_path / "done.jsonl"
    done.write_text(json.dumps({"case": "F/s/0"}) + "\n" + json.dumps({"case": "F/s/1"}) + "\n")
    for args, stdin, why in [((), True, "no case picked: the input (<stdin>) holds no case"),
                             (("--exclude", str(done), "--only-single"), False,
                              "no case left: 3 read, 2 excluded (--exclude), 1 whole requests skipped (--only-single)"),
                             (("--low", "0.1", "--high", "4"), False, "none of the 3 cases left is below --low 0.1"),
                             (("--per-key", "0"), False, "--per-key 0 takes none of the 3 cases left")]:
        rc, ids, err = pick(tmp_path, [] if stdin else lines, *args, stdin=stdin)
        last = err.splitlines()[-1]
        assert rc == 1 and ids == [] and last.startswith("pick_cases.py: ") and why in last, err
    p = subprocess.run([sys.executable, SCRIPT, "-h"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "default: stdin" in p.stdout and "Exit status: 0 ids written; 1 no id" in p.stdout


def test_bad_input(tmp_path):
    f = tmp_path / "f.jsonl"
    rc, ids, err = pick(tmp_path, [line("F/s/0", 0.5), "{not json"])
    assert rc == 2 and ids == [] and f"pick_cases.py: {f}:2: not a JSON object" in err
    rc, _, err = pick(tmp_path, [json.dumps({"case": "F/s/0", "split": "profile", "key": "k", "features": {}})])
    assert rc == 2 and f"{f}:1:" in err and "row_imbalance" in err
    good = json.loads(line("F/s/0", 0.5))
    for field, value, what in [("key", 5, "field 'key' is not a string: 5"), ("key", [1], "'key' is not a string"),
                               ("split", None, "field 'split' is not a string: null"),
                               ("features", [1], "field 'features' is not an object"),
                               ("features", {"row_imbalance": "x", "grid_rows": 264}, "'row_imbalance' is not a"),
                               ("features", {"row_imbalance": 1, "grid_rows": float("nan")}, "'grid_rows' is not a")]:
        rc, ids, err = pick(tmp_path, [line("F/s/1", 0.5), json.dumps(dict(good, **{field: value}))])
        assert rc == 2 and ids == [] and err.count("\n") == 1 and err.startswith(f"pick_cases.py: {f}:2: "), err
        assert what in err and "Traceback" not in err, err
    rc, _, err = pick(tmp_path, ["[1, 2]"], stdin=True)
    assert rc == 2 and err == "pick_cases.py: <stdin>:1: not a JSON object with a 'case' (no string field 'case')\n"
    rc, _, err = pick(tmp_path, [line("F/s/0", 0.5)], "--low", "3", "--high", "2")
    assert rc == 2 and "--low" in err
    for opt, value in [("--low", "nan"), ("--high", "inf"), ("--low", "-Infinity"), ("--high", "x")]:
        rc, _, err = pick(tmp_path, [line("F/s/0", 0.5)], f"{opt}={value}")
        assert rc == 2 and f"argument {opt}: " in err and value in err and "Traceback" not in err, err


def test_bad_bytes_and_gzip_are_one_line(tmp_path):
    utf8 = tmp_path / "u.jsonl"
    utf8.write_bytes(line("F/s/0", 0.5).encode() + b"\n" + b'{"case": "F/s/\xff"}\n')
    not_gz = tmp_path / "plain.jsonl.gz"
    not_gz.write_text(line("F/s/0", 0.5) + "\n")
    cut_gz = tmp_path / "cut.jsonl.gz"
    data = gzip.compress("".join(line(f"F/s/{i}", 0.5) + "\n" for i in range(2000)).encode())
    cut_gz.write_bytes(data[:len(data) // 2])
    for args, want in [((str(utf8),), f"pick_cases.py: {utf8}:2: not UTF-8 text"),
                       ((str(not_gz),), f"pick_cases.py: {not_gz}:1: cannot be read"),
                       ((str(cut_gz),), f"pick_cases.py: {cut_gz}:"),
                       ((str(utf8), "--exclude", str(not_gz)), f"pick_cases.py: {not_gz}:1: cannot be read")]:
        p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and p.stdout == "" and p.stderr.startswith(want), p.stderr
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_closed_stdout_ends_quietly(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text("".join(line(f"F/s/{i}", 9.0) + "\n" for i in range(50000)))
    p = subprocess.Popen([sys.executable, SCRIPT, str(path), "--per-key", "100000"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()  # as `| head -1` does
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.wait(timeout=60) == 141 and first == b"F/s/0\n" and err == "", err


def test_unreadable_file_is_a_message_not_a_traceback(tmp_path):
    for path in (tmp_path / "missing.jsonl", tmp_path):
        p = subprocess.run([sys.executable, SCRIPT, str(path)], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and "cannot be read" in p.stderr and "Traceback" not in p.stderr


def test_bom_accepted_and_records_refused_as_features(tmp_path):
    """A byte-order mark before the first line is skipped (tessera's readers accept one); a profile record given as
    FEATURES (an easy slip for --exclude) is an error that says so."""
    rc, ids, err = pick(tmp_path, ["\ufeff" + line("F/s/0", 0.5), line("F/s/1", 3.0)], "--low", "1", "--high", "2")
    assert rc == 0 and ids == ["F/s/0", "F/s/1"], err
    record = {"case": "F/s/0", "split": "profile", "key": "k", "plan": "p", "latency_us": 1.0, "features": {}}
    rc, ids, err = pick(tmp_path, [json.dumps(record)])
    assert rc == 2 and ids == [] and "a profile record" in err and "--exclude" in err, err
