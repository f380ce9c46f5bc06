#!/usr/bin/env bash
# Runs every test program and sums their closing "N passed, N failed" lines into one.
#   bash dev/test_all.sh [CMD ...]   the test commands (default: the three of `make test`)
#   MIRAS_BIN_DIR=DIR                test the binaries in DIR instead of the repo root: DIR/test_miras,
#                                    DIR/test_miras_fp64, DIR/train_miras, DIR/data_prep/* (make test_asan)
set -u
cd "$(dirname "$0")/.."
D=${MIRAS_BIN_DIR:-.}
LOGS=""
if [ "$D" != . ]; then
    export MIRAS_TRAIN_BIN="$D/train_miras" DATA_PREP_BIN_DIR="$PWD/$D/data_prep"
    # sanitizer builds: every report of every process (the trainer runs of the tests included) goes to a file in
    # $D/logs, and each such file is a failure below. Leaks at exit are not checked (a CLI that exits frees nothing).
    LOGS="$D/logs"; rm -rf "$LOGS"; mkdir -p "$LOGS"
    export MIRAS_SANITIZED=1  # (test_miras skips its slowest checks there, counted: see test_fd)
    export ASAN_OPTIONS="detect_leaks=0:log_path=$PWD/$LOGS/asan" UBSAN_OPTIONS="print_stacktrace=1:log_path=$PWD/$LOGS/ubsan"
fi
if [ $# -eq 0 ]; then
    # sanitizer builds: the test drivers check their own leaks (LeakSanitizer; each turns it off for the processes
    # it starts)
    TM=""; [ "$D" != . ] && TM="env ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=0/detect_leaks=1} "
    set -- "$TM$D/test_miras" "$TM$D/test_miras_fp64" "bash data_prep/test_data_prep.sh"
fi
# the data-parallel tests (they skip, counted, without mpirun) with the plain build only, the layout check of the
# sources (dev/check_format.sh) and float against double at long T (dev/test_precision.sh)
if [ $# -eq 3 ] && [ "$D" = . ]; then set -- "$@" "bash dev/test_mpi.sh" "bash dev/check_format.sh" "bash dev/test_precision.sh"; fi
total_pass=0; total_fail=0; total_skip=0; broken=0
for t in "$@"; do
    echo "=== $t"
    t0=$(date +%s)
    out=$($t 2>&1); code=$?
    printf '%s\n' "$out"
    echo "=== $t: $(( $(date +%s) - t0 )) s"
    last=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -z "$last" ]; then echo "!!! $t printed no summary (exit $code)"; broken=$((broken + 1)); continue; fi
    p=$(echo "$last" | awk '{print $1}'); f=$(echo "$last" | awk '{print $3}')
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    sk=$(printf '%s\n' "$out" | grep -oE '^# [0-9]+ check\(s\) skipped' | tail -n 1 | awk '{print $2}')
    total_skip=$((total_skip + ${sk:-0}))
    if [ "$code" -ne 0 ] && [ "$f" -eq 0 ]; then broken=$((broken + 1)); fi
done
if [ -n "$LOGS" ]; then
    nrep=$(ls "$LOGS" | wc -l)
    if [ "$nrep" -eq 0 ]; then echo "ok - no sanitizer report from any process"; total_pass=$((total_pass + 1))
    else for r in "$LOGS"/*; do echo "FAIL - sanitizer report $r:"; grep -m 3 -E 'ERROR|runtime error|SUMMARY' "$r"; done; total_fail=$((total_fail + nrep)); fi
fi
total_fail=$((total_fail + broken))
[ "$total_skip" -gt 0 ] && echo "# $total_skip check(s) skipped"   # (read by an enclosing test_all.sh: make ci)
echo "${total_pass} passed, ${total_fail} failed, ${total_skip} skipped"   # a skip says why above (# SKIP lines)
[ "$total_fail" -eq 0 ]
