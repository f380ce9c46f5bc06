#!/usr/bin/env bash
# The float trainer against the double one at long T (part of `make test`): exact at T = 32 is not enough, so for
# every preset a fresh model (-y 7) reads T = 1024 random tokens, 64 chunks of 16 (for time: mac at T = 512, the
# ATLAS presets with token-level muon at T = 256 and a smaller width; ~2 minutes in all on 2 cores), and
# `train_miras -J` (float) and `train_miras_fp64 -J` (the same file built with -DMIRAS_DOUBLE) dump logits, loss,
# every gradient and 3 AdamW steps, which `test_miras --compare` diffs (3 checks each: logits and loss, gradients over
# all and per tensor, the step losses and final parameters; its tolerances are those of CPU against GPU, NS5_SLACK's
# 10x for muon). The inputs come from `train_miras --make-input`.
# The last line is "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
out=build/precision
mkdir -p "$out"
for b in ./train_miras ./train_miras_fp64 ./test_miras; do
    [ -x "$b" ] || { echo "missing $b (make test builds train_miras, train_miras_fp64 and test_miras)"; echo "0 passed, 1 failed"; exit 1; }
done
big="-V 256 -D 64 -L 2 -H 2 -b 1 -t 1024"
small="-V 256 -D 32 -L 1 -H 2 -b 1 -t 256"
runs=(
  "titans           $big -E 2 -k 16"
  "moneta           $big -E 2 -k 16"
  "yaad             $big -E 2 -k 16"
  "memora           $big -E 2 -k 16"
  "ttt_mlp          $big -E 2 -k 16"
  "linear_attn      $big -k 16"
  "deltanet         $big"
  "gated_deltanet   $big"
  "lattice          $big"
  "lattice_enc      $big"
  "lattice_sim      $big"
  "omeganet         $big -E 2 -k 16"
  "atlas_chunk      $big -E 2 -k 16"
  "deep_transformer $big -E 2 -k 16"
  "dot              $big -E 2 -k 16"
  "transformer      $big"
  "titans-H         $big -P MA -W 128 -E 2 -k 16"
  "mal              $big -M 3 -W 64 -E 2 -k 16"
  "mag              $big -M 3 -W 64 -E 2 -k 16"
  "mac              ${big% -t *} -t 512 -M 3 -C 64 -E 2 -k 16"
  "atlas            $small -E 2 -k 16"
  "atlas_pp         $small -E 2 -k 16"
)
pass=0; fail=0
for r in "${runs[@]}"; do
    set -- $r; p=$1; shift
    in="$out/in_$p.bin"
    if ! ./train_miras --make-input "$in" -p "$p" "$@" -y 7 >/dev/null 2>"$out/$p.err"; then
        echo "FAIL - $p: train_miras --make-input failed: $(head -n 1 "$out/$p.err")"; fail=$((fail + 3)); continue
    fi
    if ! OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} ./train_miras -J "$in" -O "$out/f32_$p.bin" >/dev/null 2>"$out/$p.err" ||
       ! OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} ./train_miras_fp64 -J "$in" -O "$out/f64_$p.bin" >/dev/null 2>>"$out/$p.err"; then
        echo "FAIL - $p: a dump run failed: $(head -n 1 "$out/$p.err")"; fail=$((fail + 3)); continue
    fi
    res=$(./test_miras --compare "$p T=$(echo "$@" | grep -oE -- '-t [0-9]+' | cut -c4-) float vs double" \
          "$out/f64_$p.bin" "$out/f32_$p.bin" "$in" 2>&1)
    printf '%s\n' "$res" | grep -E '^(ok|FAIL)|^    .* FAIL$'
    last=$(printf '%s\n' "$res" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -z "$last" ]; then echo "FAIL - $p: test_miras --compare printed no summary"; fail=$((fail + 1)); continue; fi
    pass=$((pass + $(echo "$last" | awk '{print $1}'))); fail=$((fail + $(echo "$last" | awk '{print $3}')))
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
