#!/usr/bin/env python3
"""The instructions where a kernel's warps wait, from ncu's source page as CSV
(`ncu --import R.ncu-rep --page source --csv --print-source sass > R.csv`; the kernel built with -lineinfo).

usage: dev/cuda/ncu_top.py R.csv [N=30]
Prints the N rows with the most warp-stall samples (the column whose name holds "Warp Stall Sampling (All"; else the
first column whose name holds "Sampl"), each with its share of all samples, its address or source location and the
instruction text, then the samples summed by source line where the CSV names one. Written without knowing the
exact column names of every ncu version: it prints the header when it finds no samples column.
"""
import csv
import sys


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    head_i = next((i for i, r in enumerate(rows) if any("Sampl" in c for c in r)), None)
    if head_i is None:
        print("no samples column; the first rows:")
        for r in rows[:5]:
            print("  " + " | ".join(r)[:200])
        return
    head = rows[head_i]
    col = next((j for j, c in enumerate(head) if "Warp Stall Sampling (All" in c),
               next(j for j, c in enumerate(head) if "Sampl" in c))
    src = next((j for j, c in enumerate(head) if c.strip().lower() in ("source", "source location", "location")), None)
    txt = next((j for j, c in enumerate(head) if c.strip().lower() in ("source", "instruction", "sass")), None)
    addr = next((j for j, c in enumerate(head) if "Address" in c), None)
    body = [r for r in rows[head_i + 1:] if len(r) > col]
    total = sum(num(r[col]) for r in body) or 1.0
    print(f"{path}: {len(body)} rows, {total:.0f} samples in '{head[col]}'")
    for r in sorted(body, key=lambda r: -num(r[col]))[:n]:
        where = r[addr] if addr is not None else ""
        print(f"  {100 * num(r[col]) / total:5.1f}%  {where:>8}  {(r[txt] if txt is not None else '')[:90]}")
    if src is not None and src != txt:
        by = {}
        for r in body:
            by[r[src]] = by.get(r[src], 0.0) + num(r[col])
        print("by source location:")
        for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:n]:
            print(f"  {100 * v / total:5.1f}%  {k[:110]}")


if __name__ == "__main__":
    main()
