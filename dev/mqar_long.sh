#!/usr/bin/env bash
# MQAR with many pairs at length (a benchmark, not a test): a curriculum of four stages, each started from the
# previous stage's weights (-e: fresh AdamW), then every final model scored on fresh examples with a fixed number
# of pairs at T = 256.
# usage: dev/mqar_long.sh [PRESETS]     env: JOBS=2 OUT=build/mqar_long STAGES="T:PAIRS:STEPS ..."
#        TRAIN=0 only scores the checkpoints of an earlier run; FLAGS="-X 0.01" more trainer flags for every stage;
#        BIN=./train_miras the trainer
# Task: data_prep/synth mqar, vocab 256 (127 keys, 128 values: chance 1/128), k_1 v_1 ... k_P v_P then every key
# asked once in random order (q_i a_i), padding after; -A 1 (loss on the answers only). A stage T:A:B:S trains S
# steps of 4 sequences of T tokens, each with A..B pairs (uniform per example, synth -k A:B): short sequences with
# few pairs first, where the binding is learned in a few thousand steps; one stage straight at 64 pairs stays at
# chance for thousands of steps. Model D=64 L=2 H=2 E=2, lr 3e-3 (warmup 100, cosine to 10%), one OpenMP thread
# per run, JOBS runs at once. One README table row per preset: the answer accuracy of the final model with
# 8, 16, 32, 64 pairs (200 examples each, T = 256), the accuracy at the end of each stage on its own longest
# case, and the mean train tok/s.
set -u
cd "$(dirname "$0")/.."
presets=${1:-"titans yaad moneta memora linear_attn deltanet gated_deltanet"}
JOBS=${JOBS:-2}; OUT=${OUT:-build/mqar_long}; TRAIN=${TRAIN:-1}; FLAGS=${FLAGS:-}; BIN=${BIN:-./train_miras}
STAGES=${STAGES:-"32:1:8:8000 64:1:16:3000 128:1:32:2000 256:1:64:2000"}
EVAL_K="8 16 32 64"; EVAL_T=256
make -s train_miras data_prep >/dev/null || exit 1
mkdir -p $OUT/data
synth() { [ -f $OUT/data/$1_tokenizer.bin ] || data_prep/synth mqar -o $OUT/data/$1 -V 256 "${@:2}" >/dev/null || exit 1; }
s=0
for st in $STAGES; do
    IFS=: read -r T A B S <<< "$st"; s=$((s + 1))
    synth stage${s} -T $T -k $A:$B -q $B -n $((4 * S + 1000)) -m 0 -S $((10 + s))  # each example seen once
    synth stage${s}_val -T $T -k $B -q $B -n 1 -m 200 -S $((20 + s))
done
for k in $EVAL_K; do synth eval_k$k -T $EVAL_T -k $k -q $k -n 1 -m 200 -S $((100 + k)); done
run() {  # preset, out dir, T, steps, data, val data, init checkpoint or ""
    # shellcheck disable=SC2086  # (FLAGS: several words)
    OMP_NUM_THREADS=1 $BIN -p $1 $FLAGS -V 256 -D 64 -L 2 -H 2 -b 4 -t $3 -x $4 -v $(($4 / 4)) -m 50 -g 0 -n 0 \
        -A 1 -u 100 ${7:+-e $7} -i "$OUT/data/$5_train_*.bin" -j "$OUT/data/$6_val_*.bin" -z $OUT/data/$5_tokenizer.bin \
        -o $2 > $2.txt 2>&1
}
train() {
    local p=$1 o=$OUT/$1 prev="" s=0; mkdir -p $o
    if [ "$TRAIN" = 1 ]; then
        for st in $STAGES; do
            IFS=: read -r T A B S <<< "$st"; s=$((s + 1))
            mkdir -p $o/stage$s
            run $p $o/stage$s $T $S stage$s stage${s}_val "$prev" || return 1
            prev=$o/stage$s/ckpt.bin
        done
    fi
    local last=$o/stage$(echo $STAGES | wc -w)/ckpt.bin
    for k in $EVAL_K; do
        OMP_NUM_THREADS=1 $BIN -e $last -x 0 -b 1 -t $EVAL_T -m 200 -A 1 -g 0 -j "$OUT/data/eval_k${k}_val_*.bin" \
            -i "$OUT/data/eval_k${k}_train_*.bin" -z none -o $o/eval_k$k > $o/eval_k$k.txt 2>&1
    done
}
running=0
for p in $presets; do
    train $p & running=$((running + 1))
    if [ $running -ge $JOBS ]; then wait -n; running=$((running - 1)); fi
done
wait
acc() { grep -oE 'answer accuracy [0-9.]+' $1 2>/dev/null | tail -n1 | awk '{print $3}'; }
nst=$(echo $STAGES | wc -w)
printf "| preset | params |"; for k in $EVAL_K; do printf " %s pairs |" $k; done
s=0; for st in $STAGES; do s=$((s + 1)); IFS=: read -r T A B S <<< "$st"; printf " stage %d (T %s, %s pairs) |" $s $T $B; done
printf " train tok/s |\n|---|---|"; for k in $EVAL_K $STAGES; do printf -- "---|"; done; printf -- "---|\n"
for p in $presets; do
    o=$OUT/$p
    params=$(grep -m1 -oE '[0-9]+ params' $o/stage1.txt | awk '{print $1}')
    printf "| %s | %s |" $p "${params:-?}"
    for k in $EVAL_K; do a=$(acc $o/eval_k$k.txt); printf " %s |" "${a:-fail}"; done
    for s in $(seq 1 $nst); do  # a stage that stopped with an error is "fail" (its step-0 accuracy is no result)
        if grep -q 'error:' $o/stage$s.txt 2>/dev/null; then a=fail; else a=$(acc $o/stage$s.txt); fi
        printf " %s |" "${a:-fail}"
    done
    tps=$(cat $o/stage*/log.txt 2>/dev/null | grep -oE 'tok/s:[0-9.]+' | cut -d: -f2 | awk '{s += $1; n++} END {if (n) printf "%.0f", s / n}')
    printf " %s |\n" "${tps:-?}"
done
