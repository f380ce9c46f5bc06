"""Summarise Nsight Compute SASS source views (csv.gz) per function: the RET-delimited SASS segments by share of warp-state samples.
The inputs (runs 6 and 7) came from dev/cuda/memlab_profile.sh on the GPU: ncu --set full of one memory_{backward,forward}_kernel
(memlab, titans, T=256), then `ncu --import ... --page source --csv --print-source sass`, gzip'd to sass_{bac,for}.csv.gz."""
# Columns used (ncu 2025.x names): "Address", "Source", "Warp Stall Sampling (All Samples)" (samples), "Instructions Executed",
# "Address Space" + "Access Operation" (gld: Global/Load, gst: Global/Store, shared: Shared/Load or Store; generic accesses that
# touched both, "Global,Shared", are counted in neither), "L2 Theoretical Sectors Global" and "... Global Ideal",
# "L1 Wavefronts Shared" and "L1 Wavefronts Shared Ideal", and the per-reason samples "stall_<reason>" (not the "(Not Issued)" ones).
# The new line under each function: its 3 hottest instructions (offset, share of the kernel's samples, SASS).
# usage: python3 dev/cuda/sass_stalls.py FILE.csv.gz [FILE2.csv.gz ...] > out.txt
import argparse
import collections
import csv
import gzip

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
SUMMED = ["L2 Theoretical Sectors Global", "L2 Theoretical Sectors Global Ideal", "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal"]


def number(text):
    """A cell as an int: '-', '' and other non-numbers count as 0."""
    try:
        return int(float(text.replace(",", "")))
    except ValueError:
        return 0


def opcode(source):
    """The instruction's mnemonic with its modifiers, after any predicate: '@!P0 LDS R6, [R7]' -> 'LDS'."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def read_view(path):
    """The kernel's name and its instructions, each a dict from column name to cell."""
    with gzip.open(path, "rt", errors="replace", newline="") as f:
        reader = csv.reader(f)
        kernel = next(reader)[1].split("(")[0]
        header = next(reader)
        rows = [dict(zip(header, row)) for row in reader if len(row) >= len(header)]
    return kernel, header, rows


def split_functions(rows):
    """Segments of consecutive instructions: a new one starts at the first instruction and after each RET."""
    segments, current = [], []
    for row in rows:
        current.append(row)
        if "RET" in row["Source"]:
            segments.append(current)
            current = []
    if current:
        segments.append(current)
    return segments


def top_reasons(counts, total, n, fmt):
    return ", ".join(fmt % (reason, 100.0 * c / total) for reason, c in counts.most_common(n))


def summarise(path):
    kernel, header, rows = read_view(path)
    reasons = [c for c in header if c.startswith("stall_") and "(Not Issued)" not in c]
    base = int(rows[0]["Address"], 16)
    kernel_samples = sum(number(r[SAMPLES]) for r in rows) or 1
    kernel_reasons = collections.Counter({c[len("stall_"):]: sum(number(r[c]) for r in rows) for c in reasons})
    print("%s: %d samples; %s" % (kernel, kernel_samples, top_reasons(kernel_reasons, kernel_samples, 6, "%s %.1f%%")))

    summaries = []
    for segment in split_functions(rows):
        samples = sum(number(r[SAMPLES]) for r in segment)
        by_reason = collections.Counter()
        counts = collections.Counter()
        for r in segment:
            executed = number(r[EXECUTED])
            for c in reasons:
                by_reason[c[len("stall_"):]] += number(r[c])
            space, operation = r["Address Space"], r["Access Operation"]
            if space == "Global" and operation == "Load":
                counts["gld"] += executed
            if space == "Global" and operation == "Store":
                counts["gst"] += executed
            if space == "Shared" and operation in ("Load", "Store"):
                counts["shared"] += executed
            if opcode(r["Source"]).startswith("HMMA"):
                counts["HMMA"] += executed
            for c in SUMMED:
                counts[c] += number(r[c])
        summaries.append((samples, segment, by_reason, counts))

    summaries.sort(key=lambda s: -s[0])
    for samples, segment, by_reason, counts in summaries[:10]:
        offset = int(segment[0]["Address"], 16) - base
        print("  +0x%05x %5.1f%% (%s) %4d instr; gld %d gst %d shared %d; L2 sectors %d / ideal %d; "
              "shared wavefronts %d / ideal %d; HMMA %d" % (
                  offset, 100.0 * samples / kernel_samples, top_reasons(by_reason, samples or 1, 3, "%s %.0f%%"),
                  len(segment), counts["gld"], counts["gst"], counts["shared"], counts[SUMMED[0]], counts[SUMMED[1]],
                  counts[SUMMED[2]], counts[SUMMED[3]], counts["HMMA"]))
        hottest = sorted(segment, key=lambda r: -number(r[SAMPLES]))[:3]
        print("      hottest: " + " | ".join("+0x%05x %.1f%% %s" % (
            int(r["Address"], 16) - base, 100.0 * number(r[SAMPLES]) / kernel_samples, r["Source"].strip()[:60])
            for r in hottest))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="ncu SASS source views, csv.gz")
    for path in parser.parse_args().files:
        summarise(path)


if __name__ == "__main__":
    main()
