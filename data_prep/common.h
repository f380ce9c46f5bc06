// data_prep/common.h: small helpers shared by the data_prep tools (header-only, C11).
// defines: die/warn, checked allocation and file I/O, the token shard + answer mask writer,
//          the llm.c tokenizer file writer, a seeded RNG, a progress line, tiny arg parsing.
// File formats (see dev/CONTRACT.md), all little-endian, 256 x int32 header (1024 bytes):
//   token shard  : [0]=20240520 [1]=1 [2]=ntok, then uint16[ntok]
//   answer mask  : [0]=20261110 [1]=1 [2]=ntok, then uint8[ntok] (1 = token is an answer)
//   tokenizer    : uint32 [0]=20240328 [1]=2 [2]=vocab [3]=EOT (-1 = none), then per token
//                  a uint8 length (1..255) and that many bytes
#ifndef DATA_PREP_COMMON_H
#define DATA_PREP_COMMON_H

#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define MASK_MAGIC 20261110
#define MASK_VERSION 1
#define TOKENIZER_MAGIC 20240328
#define TOKENIZER_VERSION 2
#define HEADER_INTS 256
#define DEFAULT_SHARD_TOKENS 100000000L  // like llm.c's FineWeb shards

static const char *g_prog = "data_prep";  // set by each tool's main()

// ----------------------------------------------------------------------------
// errors: always one line on stderr, exit status 1

// g_die_hook: NULL except in the fuzz target of the shard reader (dev/fuzz), which checks the line and
// longjmps back instead of exiting. g_hint: what to do about the errors of the file being read now (set around a
// reader, NULL otherwise), printed after the message as "(hint: ...)"
static void (*g_die_hook)(const char *msg);
static const char *g_hint;
__attribute__((noreturn)) static inline void die(const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fflush(stdout);
    if (g_hint) fprintf(stderr, "%s: error: %s (hint: %s)\n", g_prog, msg, g_hint);
    else fprintf(stderr, "%s: error: %s\n", g_prog, msg);
    if (g_die_hook) g_die_hook(msg);
    exit(1);
}

static inline void warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: warning: ", g_prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static inline void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory (allocating %zu bytes)", n);
    return p;
}

static inline void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) die("out of memory (allocating %zu x %zu bytes)", count, size);
    return p;
}

static inline void *xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p) die("out of memory (allocating %zu bytes)", n);
    return p;
}

// ----------------------------------------------------------------------------
// files

static inline FILE *xfopen(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (!f && mode[0] != 'r' && !g_hint) g_hint = "the folder of the output prefix -o must exist and be writable";
    if (!f) die("cannot open '%s' for %s: %s", path, mode[0] == 'r' ? "reading" : "writing",
                strerror(errno));
    return f;
}

static inline void xfwrite(const void *p, size_t size, size_t n, FILE *f, const char *path) {
    if (n && fwrite(p, size, n, f) != n) die("write to '%s' failed: %s", path, strerror(errno));
}

static inline void xfclose(FILE *f, const char *path) {
    if (fclose(f) != 0) die("closing '%s' failed: %s", path, strerror(errno));
}

// size of a readable regular file; dies with a clear message otherwise
static inline long long input_file_size(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) die("cannot read '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) die("cannot read '%s': not a regular file", path);
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot read '%s': %s", path, strerror(errno));
    fclose(f);
    return (long long)st.st_size;
}

// whole file into memory (NUL-terminated for convenience); *len = size in bytes
static inline char *read_whole_file(const char *path, size_t *len) {
    long long size = input_file_size(path);
    FILE *f = xfopen(path, "rb");
    char *buf = xmalloc((size_t)size + 1);
    if (size && fread(buf, 1, (size_t)size, f) != (size_t)size)
        die("cannot read '%s': short read", path);
    fclose(f);
    buf[size] = 0;
    *len = (size_t)size;
    return buf;
}

static inline void write_header(FILE *f, const char *path, int32_t magic, int32_t version, int32_t n) {
    int32_t h[HEADER_INTS] = {0};
    h[0] = magic;
    h[1] = version;
    h[2] = n;
    xfwrite(h, sizeof h, 1, f, path);
}

// ----------------------------------------------------------------------------
// shard writer: PREFIX_SPLIT_%06d.bin (+ .mask when with_mask). A new shard is started
// automatically when the current one holds max_tok tokens (auto_split) or when the caller
// calls sw_end_shard(). Headers are rewritten with the final count on close.

#define SW_BUF 65536
typedef struct {
    char prefix[4096];
    const char *split;        // "train" / "val"
    long max_tok;             // max tokens per shard
    int auto_split;           // 1: start a new shard when max_tok is reached
    int with_mask;            // also write .mask files
    int index;                // index of the current / next shard
    FILE *bin, *mask;
    char bin_path[4200], mask_path[4200];
    long ntok;                // tokens in the current shard
    long long total;          // tokens over all shards
    int nshards;              // shards closed so far
    uint16_t tbuf[SW_BUF];
    uint8_t mbuf[SW_BUF];
    int nbuf;
} ShardWriter;

static inline void sw_init(ShardWriter *sw, const char *prefix, const char *split, long max_tok,
                    int auto_split, int with_mask) {
    memset(sw, 0, sizeof *sw);
    if (strlen(prefix) >= sizeof sw->prefix - 64) die("output prefix too long");
    strcpy(sw->prefix, prefix);
    sw->split = split;
    sw->max_tok = max_tok;
    sw->auto_split = auto_split;
    sw->with_mask = with_mask;
}

static inline void sw_flush(ShardWriter *sw) {
    xfwrite(sw->tbuf, sizeof(uint16_t), (size_t)sw->nbuf, sw->bin, sw->bin_path);
    if (sw->with_mask) xfwrite(sw->mbuf, 1, (size_t)sw->nbuf, sw->mask, sw->mask_path);
    sw->nbuf = 0;
}

static inline void sw_end_shard(ShardWriter *sw) {
    if (!sw->bin) return;
    sw_flush(sw);
    if (fseek(sw->bin, 0, SEEK_SET) != 0) die("seek in '%s' failed", sw->bin_path);
    write_header(sw->bin, sw->bin_path, SHARD_MAGIC, SHARD_VERSION, (int32_t)sw->ntok);
    xfclose(sw->bin, sw->bin_path);
    sw->bin = NULL;
    if (sw->with_mask) {
        if (fseek(sw->mask, 0, SEEK_SET) != 0) die("seek in '%s' failed", sw->mask_path);
        write_header(sw->mask, sw->mask_path, MASK_MAGIC, MASK_VERSION, (int32_t)sw->ntok);
        xfclose(sw->mask, sw->mask_path);
        sw->mask = NULL;
    }
    sw->index++;
    sw->nshards++;
    sw->ntok = 0;
}

static inline void sw_open_shard(ShardWriter *sw) {
    snprintf(sw->bin_path, sizeof sw->bin_path, "%s_%s_%06d.bin", sw->prefix, sw->split, sw->index);
    sw->bin = xfopen(sw->bin_path, "wb");
    write_header(sw->bin, sw->bin_path, SHARD_MAGIC, SHARD_VERSION, 0);  // count fixed on close
    if (sw->with_mask) {
        // CONTRACT: the mask file is the shard's name with .bin replaced by .mask
        snprintf(sw->mask_path, sizeof sw->mask_path, "%s_%s_%06d.mask", sw->prefix, sw->split,
                 sw->index);
        sw->mask = xfopen(sw->mask_path, "wb");
        write_header(sw->mask, sw->mask_path, MASK_MAGIC, MASK_VERSION, 0);
    }
    sw->ntok = 0;
}

static inline void sw_push(ShardWriter *sw, long tok, int is_answer) {
    if (tok < 0 || tok > 65535)
        die("token id %ld does not fit uint16 (shards hold ids 0..65535)", tok);
    if (!sw->bin) sw_open_shard(sw);
    if (sw->ntok >= 2147483647L) die("shard '%s' would exceed 2^31-1 tokens", sw->bin_path);
    sw->tbuf[sw->nbuf] = (uint16_t)tok;
    sw->mbuf[sw->nbuf] = (uint8_t)(is_answer != 0);
    sw->nbuf++;
    sw->ntok++;
    sw->total++;
    if (sw->nbuf == SW_BUF) sw_flush(sw);
    if (sw->auto_split && sw->ntok >= sw->max_tok) sw_end_shard(sw);
}

// ----------------------------------------------------------------------------
// llm.c tokenizer file (version 2 carries the EOT id; -1 = no EOT token)

static inline void write_tokenizer(const char *path, int vocab, int eot, unsigned char *const *tok,
                            const int *len) {
    FILE *f = xfopen(path, "wb");
    uint32_t h[HEADER_INTS] = {0};
    h[0] = TOKENIZER_MAGIC;
    h[1] = TOKENIZER_VERSION;
    h[2] = (uint32_t)vocab;
    h[3] = (uint32_t)(int32_t)eot;
    xfwrite(h, sizeof h, 1, f, path);
    for (int i = 0; i < vocab; i++) {
        if (len[i] < 1 || len[i] > 255)
            die("token %d is %d bytes long; the tokenizer file needs 1..255", i, len[i]);
        uint8_t l = (uint8_t)len[i];
        xfwrite(&l, 1, 1, f, path);
        xfwrite(tok[i], 1, (size_t)len[i], f, path);
    }
    xfclose(f, path);
}

// byte-level tokenizer: token b is the single byte b, vocab 256, no EOT
static inline void write_byte_tokenizer(const char *path) {
    static unsigned char bytes[256];
    unsigned char *tok[256];
    int len[256];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (unsigned char)i;
        tok[i] = &bytes[i];
        len[i] = 1;
    }
    write_tokenizer(path, 256, -1, tok, len);
}

// ----------------------------------------------------------------------------
// RNG: splitmix64 (seeded, reproducible across platforms)

typedef struct { uint64_t s; } Rng;

static inline uint64_t rng_next(Rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// uniform integer in [0, n), n >= 1 (rejection sampling, no modulo bias)
static inline uint64_t rng_below(Rng *r, uint64_t n) {
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = rng_next(r); while (x >= lim);
    return x % n;
}

static inline double rng_unit(Rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

// ----------------------------------------------------------------------------
// progress on stderr for inputs >= 16 MB: one "\r"-updated line on a terminal (every 1% or
// 64 MB), otherwise a line every 10% (log files)

typedef struct {
    long long total, next;
    int active, tty;
} Progress;

static inline void progress_init(Progress *p, long long total_bytes, int enabled) {
    p->total = total_bytes;
    p->next = 0;
    p->active = enabled && total_bytes >= (16LL << 20);
    p->tty = isatty(fileno(stderr));
}

static inline void progress_update(Progress *p, long long done, long long ntok) {
    if (!p->active || done < p->next) return;
    long long step = p->total / (p->tty ? 100 : 10);
    if (p->tty && step > (64LL << 20)) step = 64LL << 20;
    p->next = done + (step > 0 ? step : 1);
    fprintf(stderr, "%s%s: %.1f / %.1f MB (%3.0f%%), %lld tokens%s", p->tty ? "\r" : "", g_prog,
            done / 1048576.0, p->total / 1048576.0, 100.0 * (double)done / (double)p->total, ntok,
            p->tty ? "" : "\n");
    fflush(stderr);
}

static inline void progress_done(Progress *p) {
    if (p->active && p->tty) fputc('\n', stderr);
}

// ----------------------------------------------------------------------------
// argument parsing helpers

static inline long parse_long(const char *flag, const char *s, long lo, long hi) {
    if (!s) die("%s needs a value", flag);
    char *end;
    errno = 0;
    double d = strtod(s, &end);  // accepts 1e8 style too
    if (errno || end == s || *end || d != (double)(long)d)
        die("%s: '%s' is not an integer", flag, s);
    long v = (long)d;
    if (v < lo || v > hi) die("%s: %ld is out of range [%ld, %ld]", flag, v, lo, hi);
    return v;
}

static inline double parse_double(const char *flag, const char *s, double lo, double hi) {
    if (!s) die("%s needs a value", flag);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) die("%s: '%s' is not a number", flag, s);
    if (!(v >= lo && v <= hi)) die("%s: %g is out of range [%g, %g]", flag, v, lo, hi);
    return v;
}

#endif  // DATA_PREP_COMMON_H
