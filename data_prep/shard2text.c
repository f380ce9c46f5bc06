// data_prep/shard2text.c: decode an llm.c token shard back to text with an llm.c tokenizer file.
//
//   shard2text [-s START] [-n COUNT] [-i] [-m] TOKENIZER.bin SHARD.bin
//
// Writes the bytes of tokens [START, START+COUNT) to stdout (decode = concatenate each token's
// bytes, which for byte-level BPE gives back the original text). Checks both headers and the
// shard's file size (1024 + 2*ntok). -i prints token ids instead (one per line); -m reads the
// answer mask (SHARD with .bin -> .mask) and wraps every answer token in [ ].
#include "common.h"

typedef struct {
    int vocab;
    unsigned char **tok;
    int *len;
} Tokenizer;

static void read_exact(FILE *f, void *p, size_t n, const char *path) {
    if (n && fread(p, 1, n, f) != n) die("'%s' is truncated", path);
}

static void load_tokenizer(Tokenizer *t, const char *path) {
    FILE *f = xfopen(path, "rb");
    uint32_t h[HEADER_INTS];
    read_exact(f, h, sizeof h, path);
    if (h[0] != TOKENIZER_MAGIC) die("'%s' is not an llm.c tokenizer file (magic %u, want %d)", path, h[0], TOKENIZER_MAGIC);
    if (h[1] != 1 && h[1] != 2) die("'%s': unsupported tokenizer version %u", path, h[1]);
    if (h[2] == 0 || h[2] > 1000000) die("'%s': bad vocab size %u", path, h[2]);
    t->vocab = (int)h[2];
    t->tok = xcalloc((size_t)t->vocab, sizeof *t->tok);
    t->len = xcalloc((size_t)t->vocab, sizeof *t->len);
    for (int i = 0; i < t->vocab; i++) {
        uint8_t l;
        read_exact(f, &l, 1, path);
        t->len[i] = l;
        t->tok[i] = xmalloc(l);
        read_exact(f, t->tok[i], l, path);
    }
    fclose(f);
}

// opens a shard-like file, checks its header and size; returns the token count
static long long open_checked(FILE **fp, const char *path, int32_t magic, int32_t version, int elem) {
    long long size = input_file_size(path);
    FILE *f = xfopen(path, "rb");
    int32_t h[HEADER_INTS];
    read_exact(f, h, sizeof h, path);
    if (h[0] != magic) die("'%s': bad magic %d (want %d)", path, h[0], magic);
    if (h[1] != version) die("'%s': unsupported version %d (want %d)", path, h[1], version);
    long long n = h[2];
    if (n < 0 || size != 1024 + (long long)elem * n)
        die("'%s': file size %lld does not match its header (%lld tokens -> %lld bytes)", path, size, n,
            1024 + (long long)elem * n);
    *fp = f;
    return n;
}

int main(int argc, char **argv) {
    g_prog = "shard2text";
    long long start = 0, count = -1;
    int ids = 0, marks = 0;
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fprintf(stderr, "usage: shard2text [-s START] [-n COUNT] [-i] [-m] TOKENIZER.bin SHARD.bin\n"
                            "  -s START  first token (default 0)   -n COUNT  number of tokens (default all)\n"
                            "  -i        print token ids, one per line\n"
                            "  -m        wrap answer tokens (from SHARD.mask) in [ ]\n");
            return 0;
        }
        else if (!strcmp(a, "-s")) { start = parse_long("-s", v, 0, 2147483647L); i++; }
        else if (!strcmp(a, "-n")) { count = parse_long("-n", v, 0, 2147483647L); i++; }
        else if (!strcmp(a, "-i")) ids = 1;
        else if (!strcmp(a, "-m")) marks = 1;
        else if (a[0] == '-' && a[1]) die("unknown option '%s' (see -h)", a);
        else if (npos < 2) pos[npos++] = a;
        else die("too many arguments (see -h)");
    }
    if (npos != 2) die("need TOKENIZER.bin and SHARD.bin (see -h)");
    Tokenizer t;
    g_hint = "TOKENIZER.bin is the PREFIX_tokenizer.bin that text2shards or synth wrote beside the shards";
    load_tokenizer(&t, pos[0]);
    g_hint = "SHARD.bin is a PREFIX_train_NNNNNN.bin or PREFIX_val_NNNNNN.bin of text2shards or synth (llm.c's "
             "format), with its .mask beside it for -m";
    FILE *f, *mf = NULL;
    long long n = open_checked(&f, pos[1], SHARD_MAGIC, SHARD_VERSION, 2);
    if (marks) {
        char mpath[4200];
        size_t l = strlen(pos[1]);
        if (l < 4 || strcmp(pos[1] + l - 4, ".bin") || l >= sizeof mpath) die("-m: shard name must end in .bin");
        memcpy(mpath, pos[1], l - 4);
        strcpy(mpath + l - 4, ".mask");
        long long mn = open_checked(&mf, mpath, MASK_MAGIC, MASK_VERSION, 1);
        if (mn != n) die("'%s' has %lld entries but the shard has %lld tokens", mpath, mn, n);
        if (fseek(mf, 1024 + start, SEEK_SET) != 0) die("seek failed in '%s'", mpath);
    }
    g_hint = NULL;
    if (start > n) die("-s %lld is past the end of the shard (%lld tokens)", start, n);
    if (count < 0 || start + count > n) count = n - start;
    if (fseek(f, 1024 + 2 * start, SEEK_SET) != 0) die("seek failed in '%s'", pos[1]);
    for (long long i = 0; i < count; i++) {
        uint16_t id;
        uint8_t m = 0;
        read_exact(f, &id, 2, pos[1]);
        if (mf) read_exact(mf, &m, 1, "mask");
        if (ids) {
            printf(m ? "%u *\n" : "%u\n", id);
            continue;
        }
        if (id >= t.vocab)
            die("token %lld has id %u >= vocab %d (hint: give the tokenizer file written with this shard)", start + i,
                id, t.vocab);
        if (m) putchar('[');
        fwrite(t.tok[id], 1, (size_t)t.len[id], stdout);
        if (m) putchar(']');
    }
    fclose(f);
    if (mf) fclose(mf);
    if (fflush(stdout) != 0) die("write to stdout failed");
    return 0;
}
