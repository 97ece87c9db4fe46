"""bench/merge_profile_records.py (profile record sets merged for `tessera compile-table`, a case profiled again
replacing its older records): the merge and its per-file counts on stderr, .gz inputs and blank lines; the command
line (-h, no arguments, an OUT that is one of the inputs: argparse errors, no file written); inputs that cannot be
read or hold a bad line (missing, a directory, a bad or cut .gz, bytes that are not UTF-8, not a record, a 'case'
that is no string): one line naming the file (and line), exit 2, OUT not written, never a traceback. A failed write
(the file-size limit) leaves the previous OUT and no temporary file; OUT replaced with its permissions, through a
symlink, `-` and /dev/stdout for stdout; an input given twice refused, an empty one a warning. Stdlib only (Linux
for the file-size limit); made-up records, no binary."""
import gzip
import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench",
                      "merge_profile_records.py")


def rec(case, plan, lat=1.0):
    return {"case": case, "plan": plan, "latency_us": lat}


def write(path, recs, blank=False):
    text = "".join(json.dumps(r) + "\n" + ("\n" if blank else "") for r in recs)
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return str(path)


def merge(cwd, *args):
    p = subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=60, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def test_merge_replaces_older_records_of_a_case(tmp_path):
    a = write(tmp_path / "a.jsonl.gz", [rec("F/s/0", "p"), rec("F/s/0", "q"), rec("F/s/1", "p")], blank=True)
    b = write(tmp_path / "b.jsonl", [rec("F/s/0", "p", 2.0), rec("F/s/2", "p")])
    out = tmp_path / "all.jsonl"
    rc, so, se = merge(tmp_path, out, a, b)
    assert rc == 0 and so == "", se
    assert se == f"{a} 3 records; 0 older records replaced\n{b} 2 records; 2 older records replaced\n3 records\n"
    assert out.read_text() == "".join(json.dumps(r) + "\n" for r in [rec("F/s/1", "p"), rec("F/s/0", "p", 2.0),
                                                                     rec("F/s/2", "p")])


def test_command_line(tmp_path):
    rc, so, se = merge(tmp_path, "-h")
    assert rc == 0 and "usage: merge_profile_records.py [-h] OUT IN [IN ...]" in so and "profiled again" in so
    assert os.listdir(tmp_path) == []  # no file named "-h"
    for args in ([], ["out.jsonl"]):
        rc, so, se = merge(tmp_path, *args)
        assert rc == 2 and "the following arguments are required" in se and "Traceback" not in se, se
    a = write(tmp_path / "a.jsonl", [rec("F/s/0", "p")])
    before = (tmp_path / "a.jsonl").read_bytes()
    for out in (a, "a.jsonl", os.path.join(str(tmp_path), ".", "a.jsonl")):
        rc, so, se = merge(tmp_path, out, write(tmp_path / "b.jsonl", [rec("F/s/1", "p")]), "a.jsonl")
        assert rc == 2 and f"OUT {out} is the input a.jsonl" in se and (tmp_path / "a.jsonl").read_bytes() == before, se
    os.link(a, tmp_path / "hard.jsonl")  # another name of the same file
    rc, so, se = merge(tmp_path, "hard.jsonl", a)
    assert rc == 2 and "is the input" in se and (tmp_path / "a.jsonl").read_bytes() == before, se


def test_bad_inputs_are_one_line(tmp_path):
    good = write(tmp_path / "good.jsonl", [rec("F/s/0", "p")])
    (tmp_path / "u.jsonl").write_bytes(json.dumps(rec("F/s/0", "p")).encode() + b'\n{"case": "\xff"}\n')
    (tmp_path / "plain.jsonl.gz").write_text(json.dumps(rec("F/s/0", "p")) + "\n")
    data = gzip.compress("".join(json.dumps(rec(f"F/s/{i}", "p")) + "\n" for i in range(3000)).encode())
    (tmp_path / "cut.jsonl.gz").write_bytes(data[:len(data) // 2])
    (tmp_path / "dir.jsonl").mkdir()
    bad_lines = {"nojson.jsonl": ('{"case": "F/s/1"}\n{not json\n', ":2: not a profile record"),
                 "nocase.jsonl": ('\n{"plan": "p"}\n', ":2: not a profile record (KeyError"),
                 "list.jsonl": ('[1]\n', ":1: not a profile record (TypeError"),
                 "intcase.jsonl": ('{"case": [1]}\n', ":1: not a profile record (TypeError: field 'case' is not a")}
    for name, (text, _) in bad_lines.items():
        (tmp_path / name).write_text(text)
    cases = [("missing.jsonl", "missing.jsonl: cannot be read (No such file or directory)"),
             ("dir.jsonl", "dir.jsonl: cannot be read (Is a directory)"),
             ("u.jsonl", "u.jsonl: not UTF-8 text after line"),
             ("plain.jsonl.gz", "plain.jsonl.gz:1: cannot be read (Not a gzipped file"),
             ("cut.jsonl.gz", "cut.jsonl.gz:")] + [(n, n + w) for n, (_, w) in bad_lines.items()]
    for name, want in cases:
        rc, so, se = merge(tmp_path, "out.jsonl", good, name)
        last = se.splitlines()[-1]
        assert rc == 2 and last.startswith("merge_profile_records.py: " + want), se
        assert "Traceback" not in se and not (tmp_path / "out.jsonl").exists(), se
    rc, so, se = merge(tmp_path, tmp_path / "dir.jsonl" / "no" / "out.jsonl", good)
    assert rc == 2 and se.splitlines()[-1].startswith("merge_profile_records.py: ") and "cannot be written" in se, se


def test_failed_write_keeps_the_previous_out(tmp_path):
    """A write that fails midway (here the file-size limit, as `ulimit -f 100`; a full disk alike) leaves the previous
    OUT as it was and no temporary file behind."""
    import resource
    big = write(tmp_path / "big.jsonl", [rec(f"F/s/{i}", "p" * 100) for i in range(2000)])  # ~250 KB
    out = tmp_path / "prev.jsonl"
    out.write_text("previous\n")
    limit = 100 * 1024
    p = subprocess.run([sys.executable, SCRIPT, str(out), big], capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    last = p.stderr.splitlines()[-1]
    assert p.returncode == 2 and last.startswith(f"merge_profile_records.py: {out}: cannot be written ("), p.stderr
    assert "Traceback" not in p.stderr and out.read_text() == "previous\n", p.stderr
    assert sorted(os.listdir(tmp_path)) == ["big.jsonl", "prev.jsonl"]  # the temporary file removed


def test_out_replaced_stdout_and_special_files(tmp_path):
    a = write(tmp_path / "a.jsonl", [rec("F/s/0", "p")])
    want = json.dumps(rec("F/s/0", "p")) + "\n"
    out = tmp_path / "out.jsonl"
    out.write_text("older\n")
    out.chmod(0o640)
    rc, so, se = merge(tmp_path, "out.jsonl", a)
    assert rc == 0 and out.read_text() == want and (out.stat().st_mode & 0o777) == 0o640, se
    (tmp_path / "link.jsonl").symlink_to("out.jsonl")  # a symlink: the file it names is replaced, the link stays
    out.write_text("older\n")
    rc, so, se = merge(tmp_path, "link.jsonl", a)
    assert rc == 0 and (tmp_path / "link.jsonl").is_symlink() and out.read_text() == want, se
    for target in ("-", "/dev/stdout"):  # stdout (a pipe here): written directly
        rc, so, se = merge(tmp_path, target, a)
        assert rc == 0 and so == want and se.endswith("\n1 records\n"), se
    assert sorted(os.listdir(tmp_path)) == ["a.jsonl", "link.jsonl", "out.jsonl"]  # no file named "-"


def test_input_given_twice_and_empty_input(tmp_path):
    a = write(tmp_path / "a.jsonl", [rec("F/s/0", "p")])
    os.link(a, tmp_path / "hard.jsonl")
    for args, want in [(("a.jsonl", "a.jsonl"), "a.jsonl: input given twice"),
                       ((a, "./a.jsonl"), f"./a.jsonl: input given twice (also as {a})"),
                       (("a.jsonl", "hard.jsonl"), "hard.jsonl: input given twice (also as a.jsonl)")]:
        rc, so, se = merge(tmp_path, "out.jsonl", *args)
        assert rc == 2 and se == f"merge_profile_records.py: {want}\n", se
        assert not (tmp_path / "out.jsonl").exists()
    (tmp_path / "empty.jsonl").write_text("\n")
    rc, so, se = merge(tmp_path, "out.jsonl", "a.jsonl", "empty.jsonl")  # merged as nothing, with a warning
    assert rc == 0 and "merge_profile_records.py: warning: empty.jsonl: holds no record\n" in se, se
    assert (tmp_path / "out.jsonl").read_text() == json.dumps(rec("F/s/0", "p")) + "\n"
