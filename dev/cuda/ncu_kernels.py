"""Sum ncu's per-kernel durations by kernel name: the table of where a run's GPU time goes.
Input: `ncu --metrics gpu__time_duration.sum --csv --page raw --log-file F ...` (one row per profiled kernel launch;
dev/cuda/memlab_device.sh part 9 profiles a few decoder steps of the 103M titans). usage: ncu_kernels.py F [steps]
[--each: also every launch in order, ms each]"""
import csv
import sys
from collections import defaultdict

path = [a for a in sys.argv[1:] if a != "--each"][0]
each = "--each" in sys.argv
args = [a for a in sys.argv[1:] if a != "--each"]
steps = int(args[1]) if len(args) > 1 else 1
with open(path, errors="replace") as f:
    lines = [l for l in f if l.startswith('"')]  # (ncu's own messages start with ==PROF==)
rows = list(csv.reader(lines))
at = next((i for i, r in enumerate(rows) if "gpu__time_duration.sum" in r), None)  # the header row
if at is None:
    sys.exit(f"{path}: no gpu__time_duration.sum column (ncu's output is in the file as it came)")
rows = rows[at:]
head = rows[0]
names = [c for c in ("Kernel Name", "Function Name", "Demangled Name", "Name") if c in head]
if not names:
    sys.exit(f"{path}: no kernel name column in {head}")
name_col, dur_col = head.index(names[0]), head.index("gpu__time_duration.sum")
unit = rows[1][dur_col] if len(rows) > 1 and not rows[1][dur_col].replace(".", "").replace(",", "").isdigit() else "ns"
scale = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "nsecond": 1e-3}.get(unit, 1e-3)
total, count, seq = defaultdict(float), defaultdict(int), []
for r in rows[1:]:
    v = r[dur_col].replace(",", "")
    try:
        us = float(v) * scale
    except ValueError:
        continue  # the units row
    name = r[name_col].split("(")[0]
    total[name] += us
    count[name] += 1
    seq.append((name, us))
all_us = sum(total.values())
print(f"{sum(count.values())} kernel launches, {all_us:.1f} us of kernel time over {steps} step(s): "
      f"{all_us / steps:.1f} us and {sum(count.values()) / steps:.0f} launches per step (unit {unit})")
print(f"{'kernel':<60} {'per step':>8} {'us/step':>9} {'us each':>8} {'share':>6}")
for name in sorted(total, key=total.get, reverse=True)[:30]:
    print(f"{name[:60]:<60} {count[name] / steps:8.1f} {total[name] / steps:9.1f} "
          f"{total[name] / count[name]:8.2f} {100 * total[name] / all_us:5.1f}%")
if each:
    print("every launch in order (ms):")
    for i, (name, us) in enumerate(seq):
        print(f"{i:4d} {name[:60]:<60} {us / 1e3:10.3f}")
