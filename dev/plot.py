#!/usr/bin/env python3
"""Pictures for the README, from train_miras' own outputs (Debian's python3-matplotlib).

  dev/plot.py norms TABLE.md [TABLE2.md ...] -o OUT.png [--labels a,b]
      gradient norm at init against T, one line per preset, from dev/bench_long.sh's markdown tables
      (several tables, e.g. before/after a change, are drawn side by side with a shared y axis)
  dev/plot.py curves LOGDIR [LOGDIR ...] -o OUT.png [--key vl|trl|norm] [--title T]
      a quantity per step from log.txt files (vl: val loss, trl: train loss, norm: gradient norm before
      clipping); one line per directory, labelled by its name
"""
import argparse, math, os, re, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt


def read_table(path):
    """dev/bench_long.sh's table: {preset: [(T, norm or None), ...]}"""
    rows, Ts = {}, None
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or set(cells[0]) <= set("-"):
            continue
        if cells[0] == "preset":
            Ts = [int(c[2:]) for c in cells[1:] if c.startswith("T=")]
            continue
        if Ts is None:
            continue
        vals = []
        for T, c in zip(Ts, cells[1:1 + len(Ts)]):
            try:
                v = float(c)
                vals.append((T, v if math.isfinite(v) else None))
            except ValueError:
                vals.append((T, None))                  # nan, inf, fail
        rows[cells[0]] = vals
    return rows


def cmd_norms(a):
    tables = [read_table(p) for p in a.tables]
    labels = a.labels.split(",") if a.labels else [os.path.basename(p) for p in a.tables]
    fig, axes = plt.subplots(1, len(tables), figsize=(5.5 * len(tables), 4.2), sharey=True, squeeze=False)
    for ax, rows, lab in zip(axes[0], tables, labels):
        for name, vals in rows.items():
            pts = [(T, v) for T, v in vals if v is not None]
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
            bad = [T for T, v in vals if v is None]      # overflow: a cross at the top
            if bad:
                ax.plot(bad, [1e38] * len(bad), "x", color=line.get_color(), markersize=9)
        ax.set_xscale("log", base=2); ax.set_yscale("log")
        ax.set_xlabel("sequence length T"); ax.set_title(lab)
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("gradient norm at init (x: overflow)")
    axes[0][-1].legend(fontsize=8, loc="upper left")
    fig.tight_layout(); fig.savefig(a.o, dpi=90)
    print(f"wrote {a.o}")


def read_log(path, key):
    pat = re.compile(r"^s:(\d+) .*?\b%s:([^ ]+)" % re.escape(key))
    xs, ys = [], []
    for line in open(path):
        m = pat.match(line)
        if m:
            xs.append(int(m.group(1))); ys.append(float(m.group(2)))
    return xs, ys


def cmd_curves(a):
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for d in a.dirs:
        path = d if d.endswith(".txt") else os.path.join(d, "log.txt")
        xs, ys = read_log(path, a.key)
        if xs:
            ax.plot(xs, ys, label=os.path.basename(os.path.dirname(path) if path.endswith("log.txt") else path),
                    marker="." if a.key == "vl" else None)
    ax.set_xlabel("step")
    ax.set_ylabel({"vl": "val loss", "trl": "train loss", "norm": "gradient norm (before clipping)"}.get(a.key, a.key))
    if a.key == "norm":
        ax.set_yscale("log")
    if a.title:
        ax.set_title(a.title)
    ax.grid(True, alpha=0.3); ax.legend(fontsize=8)
    fig.tight_layout(); fig.savefig(a.o, dpi=90)
    print(f"wrote {a.o}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    n = sub.add_parser("norms"); n.add_argument("tables", nargs="+"); n.add_argument("-o", required=True); n.add_argument("--labels")
    c = sub.add_parser("curves"); c.add_argument("dirs", nargs="+"); c.add_argument("-o", required=True)
    c.add_argument("--key", default="vl"); c.add_argument("--title")
    a = p.parse_args()
    {"norms": cmd_norms, "curves": cmd_curves}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
