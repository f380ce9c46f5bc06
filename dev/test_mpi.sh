#!/usr/bin/env bash
# dev/test_mpi.sh: the data-parallel trainer (train_miras_mpi, `make train_miras_mpi`: train_miras.c built with
# mpicc -DUSE_MPI) under `mpirun -np 2`, against the plain one-process ./train_miras. Builds nothing. Without mpirun
# or the binary every check is skipped with a message (and counted). Runs as root too (CI): it sets Open MPI's
# OMPI_ALLOW_RUN_AS_ROOT*. One OpenMP thread per rank. Prints `ok - ...` / `not ok - ...`, ends with `N passed, N failed`.
# env: PLAIN_BIN, MPI_BIN (the two builds; dev/cuda/test_emu_nccl.sh gives train_miras.cu's on the CUDA emulator),
#      TAG (a prefix for the check names), MODEL (the model's flags, default -p titans -D 32 -L 2 -H 2 -k 4)
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_mpi.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0; fail=0; skipped=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
notok() { echo "not ok - $1"; [ -n "${2:-}" ] && echo "#   $2"; fail=$((fail + 1)); }
skip() { echo "# SKIP $1: $2"; skipped=$((skipped + 1)); }
finish() { [ "$skipped" -gt 0 ] && echo "# $skipped check(s) skipped"; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }

CHECKS=("np=2 equals one process with 2x accumulation" "np=2 with accumulation 2 per rank equals one process with 4x"
        "np=2 checkpoint carries 2 ranks and distinct data positions" "np=2 resume is bit-identical"
        "np=1 resume of an np=2 checkpoint refuses" "np=2 resume of a one-process checkpoint refuses" "a dying rank ends every rank"
        "the MPI build as one process equals the plain build" "-d not a multiple of B*T*ranks refuses"
        "np=2 -K 1 (sharded AdamW moments, ZeRO-1) equals -K 0" "np=3 -K 1 with uneven shares equals -K 0"
        "np=2 -K 1 resume is bit-identical" "a bad -K refuses")
PLAIN=${PLAIN_BIN:-./train_miras}; MPIB=${MPI_BIN:-./train_miras_mpi}
if [ -n "${TAG:-}" ]; then for i in "${!CHECKS[@]}"; do CHECKS[$i]="$TAG${CHECKS[$i]}"; done; fi
if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$MPIB" ] || [ ! -x "$PLAIN" ]; then
    why="needs mpirun, $MPIB and $PLAIN (apt-get install libopenmpi-dev openmpi-bin; make train_miras_mpi)"
    for c in "${CHECKS[@]}"; do skip "$c" "$why"; done
    finish
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none   # containers often forbid the cross-process copy (ptrace)
MPIRUN="mpirun -q --oversubscribe -np 2"

# a small corpus: this repo's Makefile as bytes (val: its first 1000 tokens)
if ! data_prep/text2shards -t byte -v 1000 -q -o "$TMP/d" Makefile >/dev/null 2>&1; then
    for c in "${CHECKS[@]}"; do notok "$c" "data_prep/text2shards failed (make data_prep)"; done; finish; fi
M="${MODEL:--p titans -D 32 -L 2 -H 2 -k 4} -b 2 -t 16 -v 3 -m 2 -g 0 -u 2 -i $TMP/d_train_*.bin -j $TMP/d_val_*.bin"
# the losses (train and val) and norms of a log, one per line
losses() { sed -E 's/.*(trl|vl):([^ ]+).*norm:([^ ]+).*/\2 \3/; s/.*vl:([^ ]+).*/\1/' "$1"; }
# same number of lines and every number within 1e-6 relative (the sums over micro-batches run in another order, so
# a float loss near 5.5 may differ in its last bit, 4.8e-7; the log prints 6 decimals)
close() { [ -s "$1" ] && [ "$(wc -l <"$1")" -eq "$(wc -l <"$2")" ] && paste -d ' ' <(losses "$1") <(losses "$2") | awk '
    { n = NF / 2; for (i = 1; i <= n; i++) { d = $i - $(i + n); if (d < 0) d = -d; m = $i < 0 ? -$i : $i; if (d > 1e-6 * (m > 1 ? m : 1)) bad = 1 } } END { exit bad }'; }
hdr_at() { od -An -v -t d4 -j "$2" -N "$3" "$1" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'; }   # int32s of a file at a byte offset
run1() { local d=$1; shift; mkdir -p "$d"; $PLAIN "$@" -o "$d" >"$d/out.txt" 2>"$d/err.txt"; }
run2() { local d=$1; shift; mkdir -p "$d"; timeout 300 $MPIRUN $MPIB "$@" -o "$d" >"$d/out.txt" 2>"$d/err.txt"; }

# 1. np=2 (a micro-batch of B*T per rank, the default -d) against one process with -d 2*B*T (2 micro-batches)
run1 "$TMP/a1" $M -x 6 -d 64; e1=$?
run2 "$TMP/a2" $M -x 6; e2=$?
if [ $e1 -eq 0 ] && [ $e2 -eq 0 ] && close "$TMP/a1/log.txt" "$TMP/a2/log.txt"; then ok "${CHECKS[0]}: 6 steps' train and val losses and gradient norms within 1e-6 (relative)"
else notok "${CHECKS[0]}" "exit codes $e1 $e2; $(paste -d '|' "$TMP/a1/log.txt" "$TMP/a2/log.txt" 2>&1 | head -3 | tr '\n' ' ') $(head -c 300 "$TMP/a2/err.txt")"; fi
# 2. accumulation on top: 2 micro-batches per rank against 4 in one process
run1 "$TMP/b1" $M -x 4 -d 128; e1=$?
run2 "$TMP/b2" $M -x 4 -d 128; e2=$?
if [ $e1 -eq 0 ] && [ $e2 -eq 0 ] && close "$TMP/b1/log.txt" "$TMP/b2/log.txt"; then ok "${CHECKS[1]}: 4 steps within 1e-6 (relative)"
else notok "${CHECKS[1]}" "exit codes $e1 $e2; $(head -c 300 "$TMP/b2/err.txt")"; fi
# 3. the checkpoint: state header slot 9 = 2, then one (shard, pos, pos high) record per rank after the moments;
# after 6 steps of 2 micro-batches of 32 tokens rank 0 reads at 6*64 = 384, rank 1 one micro-batch further at 416
n=$(hdr_at "$TMP/a2/ckpt.bin" 76 4); st=$((1024 + 4 * n))
w=$(hdr_at "$TMP/a2/ckpt.bin" $((st + 36)) 4); recs=$(hdr_at "$TMP/a2/ckpt.bin" $((st + 1024 + 8 * n)) 24)
w1=$(hdr_at "$TMP/a1/ckpt.bin" $((st + 36)) 4); size1=$(stat -c %s "$TMP/a1/ckpt.bin")
if [ "$w" = "2" ] && [ "$recs" = "0 384 0 0 416 0" ] && [ "$w1" = "1" ] && [ "$size1" -eq $((2048 + 12 * n)) ]; then
    ok "${CHECKS[2]} (rank 0 at token 384, rank 1 at 416); a one-process checkpoint says 1 rank and keeps its size"
else notok "${CHECKS[2]}" "world '$w', records '$recs', one-process world '$w1' size $size1"; fi
# 4. np=2: 3 steps, stop, resume for 3 more: the checkpoint equals the straight run's, byte for byte
run2 "$TMP/c" $M -x 6 -S 3; e1=$?
cmp -s "$TMP/c/ckpt.bin" "$TMP/a2/ckpt.bin"; midway=$?
run2 "$TMP/c" $M -x 6 -r 1; e2=$?
if [ $e1 -eq 0 ] && [ $e2 -eq 0 ] && [ $midway -ne 0 ] && cmp -s "$TMP/c/ckpt.bin" "$TMP/a2/ckpt.bin"; then ok "${CHECKS[3]}: 3 + 3 steps with a stop and resume equal 6 straight steps, byte for byte"
else notok "${CHECKS[3]}" "exit codes $e1 $e2, differed midway: $midway; $(head -c 300 "$TMP/c/err.txt")"; fi
# 5, 6. a different number of ranks refuses to resume, with one error line
one_error() { [ "$1" -eq 1 ] && [ "$(grep -c '^error: ' "$2")" -eq 1 ] && grep -q "$3" "$2" && grep -q '(hint: ' "$2"; }
cp -r "$TMP/a2" "$TMP/d1"; run1 "$TMP/d1" $M -x 8 -r 1; e=$?
if one_error $e "$TMP/d1/err.txt" "written by 2 ranks; this run has 1"; then ok "${CHECKS[4]}: $(head -n 1 "$TMP/d1/err.txt" | cut -c 1-110)..."
else notok "${CHECKS[4]}" "exit $e: $(cat "$TMP/d1/err.txt")"; fi
cp -r "$TMP/a1" "$TMP/d2"; run2 "$TMP/d2" $M -x 8 -r 1; e=$?
if one_error $e "$TMP/d2/err.txt" "written by 1 rank; this run has 2" && [ "$(wc -l <"$TMP/d2/err.txt")" -eq 1 ]; then ok "${CHECKS[5]}, one line on stderr from the two ranks"
else notok "${CHECKS[5]}" "exit $e: $(cat "$TMP/d2/err.txt")"; fi
# 7. rank 1 exits at step 3 without a word to MPI (MIRAS_KILL_RANK): mpirun ends rank 0, which says why; no hang
t0=$(date +%s)
MIRAS_KILL_RANK=1 MIRAS_KILL_STEP=3 run2 "$TMP/k" $M -x 50 -v 0; e=$?; dt=$(( $(date +%s) - t0 ))
if [ $e -ne 0 ] && [ $e -ne 124 ] && grep -q "rank 1: exiting at step 3" "$TMP/k/err.txt" && grep -q "^error: rank 0: stopped by the launcher" "$TMP/k/err.txt" \
   && [ ! -e "$TMP/k/ckpt.bin" ]; then ok "${CHECKS[6]}: exit $e after ${dt} s, rank 0 says it was stopped because another rank failed"
else notok "${CHECKS[6]}" "exit $e after ${dt} s: $(cat "$TMP/k/err.txt")"; fi
# 8. without mpirun the MPI build is one process (an MPI singleton) and computes exactly what the plain build does
mkdir -p "$TMP/e"; $MPIB $M -x 6 -d 64 -o "$TMP/e" >"$TMP/e/out.txt" 2>"$TMP/e/err.txt"; e=$?
if [ $e -eq 0 ] && cmp -s "$TMP/e/ckpt.bin" "$TMP/a1/ckpt.bin"; then ok "${CHECKS[7]}: byte-identical checkpoints"
else notok "${CHECKS[7]}" "exit $e: $(head -c 300 "$TMP/e/err.txt")"; fi
# 9. the global batch must split evenly: 96 tokens over 2 ranks of B*T = 32
run2 "$TMP/f" $M -x 2 -d 96; e=$?
if one_error $e "$TMP/f/err.txt" "not a multiple of B\*T\*ranks" && [ "$(wc -l <"$TMP/f/err.txt")" -eq 1 ]; then ok "${CHECKS[8]}: $(cut -c 1-100 "$TMP/f/err.txt")"
else notok "${CHECKS[8]}" "exit $e: $(cat "$TMP/f/err.txt")"; fi
# 10-12. ZeRO stage 1: each rank updates its share of the weights with its share of the moments, then the ranks
# gather the weights; the arithmetic per weight is unchanged, so the checkpoint (weights and the gathered moments)
# is byte-identical to the unsharded run's
run2 "$TMP/z1" $M -x 6 -K 1; e=$?
if [ $e -eq 0 ] && cmp -s "$TMP/z1/ckpt.bin" "$TMP/a2/ckpt.bin" && close "$TMP/z1/log.txt" "$TMP/a2/log.txt"; then ok "${CHECKS[9]}: byte-identical checkpoints after 6 steps, same losses"
else notok "${CHECKS[9]}" "exit $e: $(head -c 300 "$TMP/z1/err.txt")"; fi
n3=$(hdr_at "$TMP/a2/ckpt.bin" 76 4)
mkdir -p "$TMP/z3" "$TMP/z4"
timeout 300 mpirun -q --oversubscribe -np 3 $MPIB $M -x 4 -d 96 -K 1 -o "$TMP/z3" >"$TMP/z3/out.txt" 2>"$TMP/z3/err.txt"; e1=$?
timeout 300 mpirun -q --oversubscribe -np 3 $MPIB $M -x 4 -d 96 -K 0 -o "$TMP/z4" >"$TMP/z4/out.txt" 2>"$TMP/z4/err.txt"; e2=$?
if [ $e1 -eq 0 ] && [ $e2 -eq 0 ] && [ $((n3 % 3)) -ne 0 ] && cmp -s "$TMP/z3/ckpt.bin" "$TMP/z4/ckpt.bin"; then ok "${CHECKS[10]}: $n3 parameters over 3 ranks, byte-identical checkpoints"
else notok "${CHECKS[10]}" "exit codes $e1 $e2, $n3 parameters: $(head -c 300 "$TMP/z3/err.txt")"; fi
run2 "$TMP/z2" $M -x 6 -K 1 -S 3; e1=$?
run2 "$TMP/z2" $M -x 6 -K 1 -r 1; e2=$?
if [ $e1 -eq 0 ] && [ $e2 -eq 0 ] && cmp -s "$TMP/z2/ckpt.bin" "$TMP/a2/ckpt.bin"; then ok "${CHECKS[11]}: 3 + 3 steps equal 6 straight steps (of -K 0), byte for byte"
else notok "${CHECKS[11]}" "exit codes $e1 $e2: $(head -c 300 "$TMP/z2/err.txt")"; fi
run1 "$TMP/z5" $M -x 1 -K 2; e=$?
if one_error $e "$TMP/z5/err.txt" "bad -K 2"; then ok "${CHECKS[12]}: $(cut -c 1-100 "$TMP/z5/err.txt")"
else notok "${CHECKS[12]}" "exit $e: $(cat "$TMP/z5/err.txt")"; fi
finish
