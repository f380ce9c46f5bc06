#!/usr/bin/env bash
# dev/fuzz/run.sh (make fuzz): runs every libFuzzer target of dev/fuzz for FUZZ_SECONDS each (default 60), from the
# seed corpora that build/fuzz/make_seeds writes (small valid files) plus what earlier runs kept in
# build/fuzz/corpus/TARGET. A crash, a hang (-timeout), an allocation above -malloc_limit_mb or an error line
# without a hint fails the target; the input is saved as build/fuzz/crash_TARGET-* (replay: build/fuzz/fuzz_TARGET FILE).
# Prints `ok - ...` / `FAIL - ...` per target with its number of executions, then `N passed, N failed`.
set -u
cd "$(dirname "$0")/../.."
S=${FUZZ_SECONDS:-60}
B=build/fuzz
TARGETS=${FUZZ_TARGETS:-"shard mask tokenizer checkpoint fixture shard2text gpt2"}
pass=0; fail=0; execs=0
rm -rf "$B/seeds"
if ! "$B/make_seeds" "$B/seeds"; then echo "FAIL - fuzz: build/fuzz/make_seeds could not write the seeds"; echo "0 passed, 1 failed"; exit 1; fi
for t in $TARGETS; do
    mkdir -p "$B/corpus/$t"; log="$B/log_$t.txt"
    "$B/fuzz_$t" -max_total_time="$S" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -close_fd_mask=3 \
        -print_final_stats=1 -artifact_prefix="$B/crash_$t-" "$B/corpus/$t" "$B/seeds/$t" >"$log" 2>&1
    rc=$?
    n=$(grep -oE 'number_of_executed_units: [0-9]+' "$log" | tail -n 1 | awk '{print $2}'); n=${n:-0}
    execs=$((execs + n))
    if [ $rc -eq 0 ] && [ "$n" -gt 0 ]; then
        echo "ok - fuzz $t: $n executions in ${S}s, no crash, hang, huge allocation or hintless error (corpus $(ls "$B/corpus/$t" | wc -l) files)"
        pass=$((pass + 1))
    else
        why=$(grep -m 1 -E 'ERROR:|SUMMARY:|^fuzz: |runtime error' "$log"); art=$(grep -m 1 -oE 'Test unit written to [^ ]+' "$log")
        echo "FAIL - fuzz $t (exit $rc, $n executions): ${why:-see $log} ${art:+($art)}"
        fail=$((fail + 1))
    fi
done
echo "# fuzz: $execs executions in all"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
