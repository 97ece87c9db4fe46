#!/usr/bin/env python3
"""Concatenates profile record sets (tessera profile JSON lines, .jsonl or .jsonl.gz) for `tessera compile-table`,
where a case profiled again replaces its older records: every record of a case id that a later file holds is dropped
from the earlier files. Prints per file how many records it adds and replaces (stderr).

Usage: bench/merge_profile_records.py OUT.jsonl IN1 [IN2 ...]   (in the order they were profiled)
  OUT is written (plain JSON lines) only after every input was read, to a temporary file in OUT's directory that
  replaces OUT only once complete (a failed write, e.g. a full disk, leaves an earlier OUT as it was); OUT `-`: stdout;
  an OUT that exists and is no regular file (/dev/stdout, a FIFO) is written directly. An OUT that is one of the
  inputs, or an input given twice (under any spelling), is refused. An input that holds no record: a warning on
  stderr, merged as nothing (exit 0).
  Exit status: 0 written; 2 a bad argument, OUT that cannot be written, or an input that cannot be read or holds a
  line that is not a profile record (one line on stderr naming the file and line; OUT is then not written).

The embedded sm90a table: docs/selection.md, "The embedded H200 table (sm90a)", lists the inputs in order.
"""
import argparse
import json
import os
import stat
import sys

from json_lines import json_lines

PROG = "merge_profile_records.py"


def fail(where, what):
    """Exits with status 2 and one line on stderr: `merge_profile_records.py: <where>: <what>`."""
    print(f"{PROG}: {where}: {what}", file=sys.stderr)
    sys.exit(2)


def same_file(a, b):
    """Whether paths a and b name one file (the same inode when both exist, else the same resolved path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def read_records(f):
    """The records of one .jsonl / .jsonl.gz file, blank lines skipped; exits naming the file (and line)."""
    rs = []
    for n, r in json_lines(f, fail, bad_json="not a profile record"):
        try:
            if not isinstance(r['case'], str):
                raise TypeError(f"field 'case' is not a string: {json.dumps(r['case'])}")
        except (KeyError, TypeError) as ex:
            fail(f"{f}:{n}", f"not a profile record ({type(ex).__name__}: {ex})")
        rs.append(r)
    return rs


def write_records(path, recs):
    """Writes recs as JSON lines to path: `-` is stdout, an existing path that is no regular file is written directly,
    any other through a temporary file in its directory that replaces it only once complete (removed on failure)."""
    tmp = None
    try:
        if path == "-":
            out = os.fdopen(os.dup(sys.stdout.fileno()), 'w')
        else:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISREG(st.st_mode):
                out = open(path, 'w')
            else:
                target = os.path.realpath(path)  # a symlink: replace the file it names, not the link
                tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.{os.getpid()}.tmp")
                out = os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), 'w')  # umask applies
                if st is not None:
                    os.chmod(tmp, stat.S_IMODE(st.st_mode))  # keep a replaced OUT's permissions
        with out:
            for r in recs: out.write(json.dumps(r) + '\n')
        if tmp:
            os.replace(tmp, target)
            tmp = None
    except OSError as ex:
        fail(path, f"cannot be written ({ex.strerror or ex})")
    finally:
        if tmp:
            try:
                os.remove(tmp)
            except OSError:
                pass


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                 epilog=__doc__[__doc__.index("  OUT is written"):__doc__.index("\n\nThe embedded")],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", metavar="OUT", help="the merged records (.jsonl, replaced; - for stdout)")
    ap.add_argument("inputs", metavar="IN", nargs="+",
                    help="profile records (.jsonl or .jsonl.gz), in the order they were profiled")
    a = ap.parse_args(argv)
    for i, f in enumerate(a.inputs):
        if a.out != "-" and same_file(a.out, f):
            ap.error(f"OUT {a.out} is the input {f} (it would be overwritten)")
        for g in a.inputs[:i]:
            if same_file(g, f):
                fail(f, "input given twice" + (f" (also as {g})" if g != f else ""))
    recs = []
    for f in a.inputs:
        rs = read_records(f)
        if not rs:
            print(f"{PROG}: warning: {f}: holds no record", file=sys.stderr)
        new_cases = {r['case'] for r in rs}
        before = len(recs)
        recs = [r for r in recs if r['case'] not in new_cases]
        print(f, len(rs), 'records;', before - len(recs), 'older records replaced', file=sys.stderr)
        recs += rs
    write_records(a.out, recs)
    print(len(recs), 'records', file=sys.stderr)


if __name__ == "__main__":
    main()
