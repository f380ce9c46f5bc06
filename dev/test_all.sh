#!/usr/bin/env bash
# Runs every test program and sums their closing "N passed, N failed" lines into one.
set -u
cd "$(dirname "$0")/.."
total_pass=0; total_fail=0; total_skip=0; broken=0
for t in ./test_miras ./test_miras_fp64 "bash data_prep/test_data_prep.sh" "bash dev/test_mpi.sh"; do
    echo "=== $t"
    out=$($t 2>&1); code=$?
    printf '%s\n' "$out"
    last=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -z "$last" ]; then echo "!!! $t printed no summary (exit $code)"; broken=$((broken + 1)); continue; fi
    p=$(echo "$last" | awk '{print $1}'); f=$(echo "$last" | awk '{print $3}')
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    sk=$(printf '%s\n' "$out" | grep -oE '^# [0-9]+ check\(s\) skipped' | tail -n 1 | awk '{print $2}')
    total_skip=$((total_skip + ${sk:-0}))
    if [ "$code" -ne 0 ] && [ "$f" -eq 0 ]; then broken=$((broken + 1)); fi
done
total_fail=$((total_fail + broken))
echo "${total_pass} passed, ${total_fail} failed, ${total_skip} skipped"   # a skip says why above (# SKIP lines)
[ "$total_fail" -eq 0 ]
