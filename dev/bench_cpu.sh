#!/usr/bin/env bash
# CPU throughput: train_miras against the PyTorch reference on the same model, in the same run.
# usage: dev/bench_cpu.sh [preset] [D] [L] [H] [B] [T] [steps]     (defaults: the quick-start model)
# train_miras' tokens/s includes the AdamW update; the reference's is forward + backward only.
set -eu
cd "$(dirname "$0")/.."
preset=${1:-titans}; D=${2:-128}; L=${3:-4}; H=${4:-4}; B=${5:-8}; T=${6:-128}; steps=${7:-10}
make -s train_miras data >/dev/null
c_tps=$(./train_miras -p "$preset" -D "$D" -L "$L" -H "$H" -E 2 -b "$B" -t "$T" -x "$steps" -v 0 -g 0 -n 0 -o build/bench \
        | grep -E '^step +[0-9]+/' | tail -n +2 | sed -E 's/.*\| ([0-9]+) tok\/s/\1/' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
py_line=$(/usr/bin/python3 dev/reference.py bench --preset "$preset" --D "$D" --L "$L" --H "$H" --E 2 --V 256 --B "$B" --T "$T" --steps 2 | tail -n 1)
py_tps=$(echo "$py_line" | sed -E 's/.*, ([0-9.]+) tokens\/s/\1/')
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "model: $preset D=$D L=$L H=$H E=2 V=256 B=$B T=$T"
echo "train_miras (C, fp32, $(nproc) threads): $c_tps tok/s (median of steps 2..$steps)"
echo "PyTorch reference ($(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), fp32): $py_tps tok/s"
awk -v c="$c_tps" -v p="$py_tps" 'BEGIN { printf "ratio: %.1fx\n", c / p }'
