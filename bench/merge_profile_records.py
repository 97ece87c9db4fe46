#!/usr/bin/env python3
"""Concatenates profile record sets (tessera profile JSON lines, .jsonl or .jsonl.gz) for `tessera compile-table`,
where a case profiled again replaces its older records: every record of a case id that a later file holds is dropped
from the earlier files. Prints per file how many records it adds and replaces (stderr).

Usage: bench/merge_profile_records.py OUT.jsonl IN1 [IN2 ...]   (in the order they were profiled)

The embedded sm90a table: docs/selection.md, "The embedded H200 table (sm90a)", lists the inputs in order.
"""
import gzip
import json
import sys
files = sys.argv[2:]
recs = []
for f in files:
    op = gzip.open if f.endswith('.gz') else open
    rs = []
    with op(f, 'rt') as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                r['case']
            except (ValueError, KeyError, TypeError) as ex:
                sys.exit(f"merge_profile_records: {f} line {n}: not a profile record ({type(ex).__name__}: {ex})")
            rs.append(r)
    new_cases = {r['case'] for r in rs}
    before = len(recs)
    recs = [r for r in recs if r['case'] not in new_cases]
    print(f, len(rs), 'records;', before - len(recs), 'older records replaced', file=sys.stderr)
    recs += rs
with open(sys.argv[1], 'w') as out:
    for r in recs: out.write(json.dumps(r) + '\n')
print(len(recs), 'records', file=sys.stderr)
