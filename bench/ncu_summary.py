#!/usr/bin/env python3
"""Summarises an `ncu --csv --page raw` log: per kernel name (shortened), the median of each metric column.
Usage: ncu_summary.py NCU_CSV"""
import csv
import re
import statistics
import sys

rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
head, units, data = rows[0], rows[1], rows[2:]
k = head.index("Kernel Name")
metrics = [i for i, h in enumerate(head) if "__" in h]
by = {}
for r in data:
    # template arguments kept (the Config and KvVariant tell the catalog entries apart), namespaces dropped
    full = r[k][: r[k].rfind("(")] if r[k].endswith(")") else r[k]  # drop the parameter list
    name = re.sub(r"^void ", "", re.sub(r"\b[A-Za-z_]\w*::", "", full)).replace(" ", "")[:70]
    by.setdefault(name, []).append(r)
print("kernel".ljust(70), "n", *[head[i].split(".")[0][-22:].rjust(22) for i in metrics])
for name, rs in by.items():
    vals = []
    for i in metrics:
        try:
            vals.append(f"{statistics.median(float(r[i].replace(',', '')) for r in rs):.4g} {units[i]}".rjust(22))
        except ValueError:
            vals.append("?".rjust(22))
    print(name.ljust(70), len(rs), *vals)
