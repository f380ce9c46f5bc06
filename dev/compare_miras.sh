#!/usr/bin/env bash
# Equal-size, equal-token comparison of the memory presets on tinyshakespeare (byte-level) and on MQAR.
# usage: dev/compare_miras.sh [OUTDIR]     (needs ../shared/data/tinyshakespeare.txt; ~30 min on 2 cores)
# env: PRESETS (default below), TS_STEPS (150), MQ_STEPS (8000), SKIP_DATA=1 to reuse OUTDIR's data, EXTRA (model flags),
#      BIN (the trainer: ./train_miras, or ./train_miras_cu on a GPU, built by hand), TS (the text file)
# Prints a markdown table: final val loss, MQAR answer accuracy, median tokens/s.
set -eu
cd "$(dirname "$0")/.."
out=${1:-build/compare}; mkdir -p "$out"
make -s train_miras data_prep >/dev/null
bin=${BIN:-./train_miras}
presets=${PRESETS:-"titans moneta yaad memora linear_attn"}; ts_steps=${TS_STEPS:-150}; mq_steps=${MQ_STEPS:-8000}
ts=${TS:-../shared/data/tinyshakespeare.txt}
[ -f "$ts" ] || { echo "error: $ts not found (hint: run from a checkout next to shared/)"; exit 1; }
if [ "${SKIP_DATA:-0}" != 1 ]; then
    data_prep/text2shards -q -t byte -v 0.1 -o "$out/ts" "$ts"
    data_prep/synth mqar -o "$out/mqar" -V 64 -T 16 -k 4 -q 4 -n 20000 -m 512 > "$out/mqar_synth.txt"
fi
model="-D 64 -L 2 -H 2 -E 2 -k 16 -g 0 -n 0 ${EXTRA:-}"   # EXTRA: more flags for every preset (e.g. -W 64 -M 16)
median() { grep -E '^step +[0-9]+/' "$1" | tail -n +2 | sed -E 's/.*\| ([0-9]+) tok\/s/\1/' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| preset | params | tinyshakespeare val loss | tok/s | MQAR answer accuracy | MQAR val loss | tok/s |"
echo "|---|---|---|---|---|---|---|"
for p in $presets; do
    if [ "${SKIP_MQ_TITANS:-0}" = 1 ] && [ "$p" = titans ]; then mq_skip=1; else mq_skip=0; fi
    "$bin" -p "$p" $model -V 256 -b 8 -t 128 -x "$ts_steps" -v 50 -m 8 -l 3e-3 -u 20 \
        -i "$out/ts_train_*.bin" -j "$out/ts_val_*.bin" -z "$out/ts_tokenizer.bin" -o "$out/ts_$p" > "$out/ts_$p.log"
    [ "$mq_skip" = 1 ] || "$bin" -p "$p" $model -V 64 -b 4 -t 16 -x "$mq_steps" -v 2000 -m 32 -l 3e-3 -u 100 \
        -i "$out/mqar_train_*.bin" -j "$out/mqar_val_*.bin" -z "$out/mqar_tokenizer.bin" -o "$out/mq_$p" > "$out/mq_$p.log"
    np=$(grep -m1 params "$out/ts_$p.log" | sed -E 's/.*\| ([0-9]+) params.*/\1/')
    tsl=$(grep 'val loss' "$out/ts_$p.log" | tail -1 | sed -E 's/.*val loss ([0-9.]+).*/\1/')
    mql=$(grep 'val loss' "$out/mq_$p.log" | tail -1 | sed -E 's/.*val loss ([0-9.]+).*/\1/')
    acc=$(grep 'answer accuracy' "$out/mq_$p.log" | tail -1 | sed -E 's/.*answer accuracy ([0-9.]+).*/\1/')
    echo "| $p | $np | $tsl | $(median "$out/ts_$p.log") | $acc | $mql | $(median "$out/mq_$p.log") |"
done
echo "MQAR: $(grep chance "$out/mqar_synth.txt")"
