"""Reading JSON-lines files (.jsonl, or .jsonl.gz by name) for the bench scripts, with one-line errors instead of
tracebacks: bench/merge_profile_records.py and bench/selection_study.py. (bench/pick_cases.py reads bytes, stdin
included, to name the exact line of a non-UTF-8 byte: its own reader.)"""
import gzip
import json
import zlib


def json_lines(path, fail, bad_json="not JSON", encoding="utf-8"):
    """Yields (line number, value) for each non-blank line of `path`. `fail(where, what)` must not return (the
    scripts print `<prog>: <where>: <what>` and exit 2); it is called for a file that cannot be opened or read (where:
    the path; a bad or truncated .gz: path:line), text that is not in `encoding` (where: the path) and a line that is
    no JSON (where: path:line, what: `bad_json (<exception>)`). encoding "utf-8-sig" also accepts a leading BOM."""
    try:
        f = (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding=encoding)
    except OSError as ex:  # missing, a directory, no permission
        fail(path, f"cannot be read ({ex.strerror or ex})")
    n = 0
    try:
        with f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except (ValueError, RecursionError) as ex:
                    fail(f"{path}:{n}", f"{bad_json} ({type(ex).__name__}: {ex})")
                yield n, value
    except UnicodeDecodeError as ex:
        fail(path, f"not UTF-8 text after line {n} ({ex.reason})")
    except (OSError, EOFError, zlib.error) as ex:  # a bad or truncated .gz, a read error
        fail(f"{path}:{n + 1}", f"cannot be read ({getattr(ex, 'strerror', None) or ex})")
