#!/usr/bin/env python3
"""Summarises an `ncu --csv --page raw` log: per kernel name (shortened), the median of each metric column.
Usage: ncu_summary.py NCU_CSV"""
import csv
import statistics
import sys

rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
head, units, data = rows[0], rows[1], rows[2:]
k = head.index("Kernel Name")
metrics = [i for i, h in enumerate(head) if "__" in h]
by = {}
for r in data:
    name = r[k].split("(")[0].split("<")[0].split("::")[-1][:28]
    by.setdefault(name, []).append(r)
print("kernel".ljust(28), "n", *[head[i].split(".")[0][-22:].rjust(22) for i in metrics])
for name, rs in by.items():
    vals = []
    for i in metrics:
        try:
            vals.append(f"{statistics.median(float(r[i].replace(',', '')) for r in rs):.4g} {units[i]}".rjust(22))
        except ValueError:
            vals.append("?".rjust(22))
    print(name.ljust(28), len(rs), *vals)
