// data_prep/synth.c: synthetic memory tasks -> token shards + answer masks + tokenizer file.
//
//   synth mqar -o PREFIX [-V 8192] [-T 64] [-k 16 | -k MIN:MAX] [-q 16] [-n 20000] [-m 1000] [-S 1337] [-s NTOK]
//   synth niah -o PREFIX [-T 1024] [-d 5] [-D DEPTH] [-f words|repeat] [-n 2000] [-m 200] [-S 1337]
//
// Every example is exactly T tokens, so a loader that cuts rows of T consecutive tokens (target
// of position i = token i+1) sees one example per row. Each shard holds whole examples plus one
// trailing filler token (mask 0), so the last row also has a target: ntok = examples*T + 1.
// Writes PREFIX_{train,val}_%06d.bin, the matching .mask files (1 = this token is an answer,
// to be predicted from the previous position) and PREFIX_tokenizer.bin.
//
// mqar (multi-query associative recall, Zoology style):
//   k_1 v_1 k_2 v_2 ... k_P v_P  q_1 a_1 ... q_Q a_Q  pad...
//   P distinct keys from ids 1..K, P distinct values from ids K+1..V-1 (K = (V-1)/2); the Q
//   queries are distinct keys of the example in random order, each followed by its value a_i
//   (mask 1). id 0 is the pad token. Chance accuracy = 1 / (V-1-K).
//   -k MIN:MAX draws each example's P uniformly from MIN..MAX and asks min(Q, P) queries (a mix of
//   easy and hard examples in one training set; evaluate on sets with a fixed -k).
// niah (single needle in a haystack, RULER S-NIAH style, byte-level tokens):
//   filler ... "The passkey is 12345. " ... filler ... "What is the passkey? The passkey is 12345.\n"
//   The needle sits at a sentence boundary at a random depth (or -D); the digits after the final
//   "The passkey is " are the answers (mask 1). Filler: generated pseudo-word sentences (words)
//   or one fixed sentence repeated (repeat).
#include "common.h"

typedef struct {
    const char *task, *prefix, *filler;
    long ntrain, nval, shard, V, T, P, Q, digits;
    long Pmin;     // mqar: pairs per example drawn from Pmin..P (Pmin == P: always P)
    double depth;  // < 0: random
    uint64_t seed;
} Opts;

typedef void (*GenFn)(const Opts *o, Rng *r, uint16_t *tok, uint8_t *mask);

// ----------------------------------------------------------------------------
// mqar

static long mqar_nkeys(const Opts *o) { return (o->V - 1) / 2; }

// partial Fisher-Yates: the first k entries of perm[0..n) become a uniform random k-subset
static void sample_distinct(Rng *r, int32_t *perm, long n, long k) {
    for (long i = 0; i < k; i++) {
        long j = i + (long)rng_below(r, (uint64_t)(n - i));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

static void gen_mqar(const Opts *o, Rng *r, uint16_t *tok, uint8_t *mask) {
    static int32_t *keys, *vals, *qidx;
    long K = mqar_nkeys(o), NV = o->V - 1 - K;
    if (!keys) {  // persistent permutations (stay permutations after every shuffle)
        keys = xmalloc((size_t)K * sizeof *keys);
        vals = xmalloc((size_t)NV * sizeof *vals);
        qidx = xmalloc((size_t)o->P * sizeof *qidx);
        for (long i = 0; i < K; i++) keys[i] = (int32_t)(1 + i);
        for (long i = 0; i < NV; i++) vals[i] = (int32_t)(1 + K + i);
        for (long i = 0; i < o->P; i++) qidx[i] = (int32_t)i;
    }
    long P = o->P;
    if (o->Pmin < o->P) P = o->Pmin + (long)rng_below(r, (uint64_t)(o->P - o->Pmin + 1));
    long Q = o->Q < P ? o->Q : P;
    sample_distinct(r, keys, K, P);
    sample_distinct(r, vals, NV, P);
    for (long i = 0; i < P; i++) qidx[i] = (int32_t)i;  // a k-subset of this example's P pairs
    sample_distinct(r, qidx, P, Q);
    memset(tok, 0, (size_t)o->T * sizeof *tok);
    memset(mask, 0, (size_t)o->T);
    long t = 0;
    for (long i = 0; i < P; i++) {
        tok[t++] = (uint16_t)keys[i];
        tok[t++] = (uint16_t)vals[i];
    }
    for (long i = 0; i < Q; i++) {
        tok[t++] = (uint16_t)keys[qidx[i]];
        mask[t] = 1;
        tok[t++] = (uint16_t)vals[qidx[i]];
    }
}

static void mqar_tokenizer(const Opts *o, const char *path) {
    long K = mqar_nkeys(o);
    unsigned char **tok = xmalloc((size_t)o->V * sizeof *tok);
    int *len = xmalloc((size_t)o->V * sizeof *len);
    for (long i = 0; i < o->V; i++) {
        char s[32];
        if (i == 0) snprintf(s, sizeof s, " _");
        else if (i <= K) snprintf(s, sizeof s, " k%ld", i - 1);
        else snprintf(s, sizeof s, " v%ld", i - 1 - K);
        len[i] = (int)strlen(s);
        tok[i] = xmalloc((size_t)len[i]);
        memcpy(tok[i], s, (size_t)len[i]);
    }
    write_tokenizer(path, (int)o->V, -1, tok, len);
    for (long i = 0; i < o->V; i++) free(tok[i]);
    free(tok);
    free(len);
}

// ----------------------------------------------------------------------------
// niah

static const char NIAH_QUERY[] = "What is the passkey? The passkey is ";
static const char REPEAT_SENTENCE[] = "A small boat drifts past the quiet harbor while gulls circle overhead. ";

static size_t niah_needle_len(const Opts *o) { return strlen("The passkey is . ") + (size_t)o->digits; }
static size_t niah_query_len(const Opts *o) { return strlen(NIAH_QUERY) + (size_t)o->digits + 2; }  // ".\n"

// a pronounceable pseudo-word of 1..3 consonant-vowel syllables
static size_t pseudo_word(Rng *r, char *w) {
    static const char C[] = "bcdfghjklmnprstvwz", V[] = "aeiou";
    size_t n = 0;
    long syl = 1 + (long)rng_below(r, 3);
    for (long s = 0; s < syl; s++) {
        w[n++] = C[rng_below(r, sizeof C - 1)];
        w[n++] = V[rng_below(r, sizeof V - 1)];
    }
    if (rng_below(r, 3) == 0) w[n++] = C[rng_below(r, sizeof C - 1)];
    return n;
}

// fills buf[0..F) with whole sentences ("... . "), padding the rest with spaces; records the
// start offset of each sentence in starts (returns how many, the first is 0)
static long niah_filler(const Opts *o, Rng *r, char *buf, long F, long *starts) {
    long pos = 0, ns = 0;
    if (!strcmp(o->filler, "repeat")) {
        long L = (long)strlen(REPEAT_SENTENCE);
        while (pos + L <= F) {
            starts[ns++] = pos;
            memcpy(buf + pos, REPEAT_SENTENCE, (size_t)L);
            pos += L;
        }
    } else {
        for (;;) {
            long nw = 4 + (long)rng_below(r, 9), len = 0;
            char w[16];
            for (long k = 0; k < nw; k++) {
                size_t wl = pseudo_word(r, w);
                long need = (long)wl + (k > 0) + 2;  // separator space, then ". "
                if (pos + len + need > F) break;
                if (k > 0) buf[pos + len++] = ' ';
                memcpy(buf + pos + len, w, wl);
                if (k == 0) buf[pos] = (char)(buf[pos] - 'a' + 'A');
                len += (long)wl;
            }
            if (len == 0) break;
            starts[ns++] = pos;
            buf[pos + len++] = '.';
            buf[pos + len++] = ' ';
            pos += len;
        }
    }
    starts[ns++] = pos;  // the end of the filler is a boundary too
    memset(buf + pos, ' ', (size_t)(F - pos));
    return ns;
}

static void gen_niah(const Opts *o, Rng *r, uint16_t *tok, uint8_t *mask) {
    static char *filler, *ex;
    static long *starts;
    long T = o->T, F = T - (long)niah_needle_len(o) - (long)niah_query_len(o);
    if (!filler) {
        filler = xmalloc((size_t)F);
        ex = xmalloc((size_t)T + 64);
        starts = xmalloc(((size_t)F / 2 + 2) * sizeof *starts);
    }
    char key[32];
    key[0] = (char)('1' + rng_below(r, 9));
    for (long i = 1; i < o->digits; i++) key[i] = (char)('0' + rng_below(r, 10));
    key[o->digits] = 0;
    long ns = niah_filler(o, r, filler, F, starts);
    double depth = o->depth >= 0 ? o->depth : rng_unit(r);
    long best = 0;  // the sentence boundary closest to depth * F
    for (long i = 1; i < ns; i++)
        if (labs(starts[i] - (long)(depth * F)) < labs(starts[best] - (long)(depth * F))) best = i;
    long at = starts[best], n = 0;
    memcpy(ex, filler, (size_t)at);
    n = at;
    n += sprintf(ex + n, "The passkey is %s. ", key);
    memcpy(ex + n, filler + at, (size_t)(F - at));
    n += F - at;
    n += sprintf(ex + n, "%s", NIAH_QUERY);
    long ans = n;
    n += sprintf(ex + n, "%s.\n", key);
    if (n != T) die("internal error: niah example has %ld bytes, want %ld", n, T);
    for (long i = 0; i < T; i++) {
        tok[i] = (unsigned char)ex[i];
        mask[i] = i >= ans && i < ans + o->digits;
    }
}

// ----------------------------------------------------------------------------

static void write_split(const Opts *o, const char *split, long n, uint64_t stream, GenFn gen,
                        uint16_t filler_tok, long *nshards) {
    ShardWriter *sw = xmalloc(sizeof *sw);
    sw_init(sw, o->prefix, split, o->shard, 0, 1);
    Rng r = {o->seed * 0x9E3779B97F4A7C15ULL + stream};
    uint16_t *tok = xmalloc((size_t)o->T * sizeof *tok);
    uint8_t *mask = xmalloc((size_t)o->T);
    for (long e = 0; e < n; e++) {
        if (sw->bin && sw->ntok + o->T + 1 > o->shard) {  // shards hold whole examples
            sw_push(sw, filler_tok, 0);
            sw_end_shard(sw);
        }
        gen(o, &r, tok, mask);
        for (long i = 0; i < o->T; i++) sw_push(sw, tok[i], mask[i]);
    }
    if (sw->bin) {
        sw_push(sw, filler_tok, 0);
        sw_end_shard(sw);
    }
    *nshards = sw->nshards;
    free(tok);
    free(mask);
    free(sw);
}

static void usage(void) {
    fprintf(stderr,
        "usage: synth mqar|niah -o PREFIX [options]\n"
        "common:  -n NTRAIN examples (mqar 20000, niah 2000)  -m NVAL examples (mqar 1000, niah 200)\n"
        "         -S SEED (1337)  -s NTOK max tokens per shard (default %ld; whole examples)\n"
        "mqar:    -V VOCAB (8192)  -T SEQLEN (64)  -k PAIRS (16) or MIN:MAX (uniform per example)\n"
        "         -q QUERIES (16, <= PAIRS; with MIN:MAX each example asks min(QUERIES, its pairs))\n"
        "niah:    -T LEN bytes (1024; 1K..16K typical)  -d DIGITS (5)  -D DEPTH in [0,1] (random)\n"
        "         -f words|repeat (filler: pseudo-word sentences or one fixed sentence)\n",
        DEFAULT_SHARD_TOKENS);
}

int main(int argc, char **argv) {
    g_prog = "synth";
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage();
        return argc < 2;
    }
    Opts o = {.task = argv[1], .prefix = NULL, .filler = "words", .ntrain = -1, .nval = -1,
              .shard = DEFAULT_SHARD_TOKENS, .V = 8192, .T = -1, .P = 16, .Pmin = -1, .Q = 16, .digits = 5,
              .depth = -1, .seed = 1337};
    int mqar = !strcmp(o.task, "mqar"), niah = !strcmp(o.task, "niah");
    if (!mqar && !niah) die("unknown task '%s' (mqar or niah)", o.task);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h")) { usage(); return 0; }
        if (a[0] != '-' || !a[1] || a[2]) die("unexpected argument '%s' (see -h)", a);
        switch (a[1]) {
            case 'o': if (!v) die("-o needs a value"); o.prefix = v; break;
            case 'n': o.ntrain = parse_long("-n", v, 1, 1L << 40); break;
            case 'm': o.nval = parse_long("-m", v, 0, 1L << 40); break;
            case 'S': o.seed = (uint64_t)parse_long("-S", v, 0, 1L << 52); break;
            case 's': o.shard = parse_long("-s", v, 2, 2147483647L); break;
            case 'V': o.V = parse_long("-V", v, 1, 1L << 40); break;
            case 'T': o.T = parse_long("-T", v, 1, 1L << 24); break;
            case 'k': {
                const char *colon = v ? strchr(v, ':') : NULL;
                if (colon) {
                    char lo[32];
                    size_t n = (size_t)(colon - v);
                    if (n == 0 || n >= sizeof lo) die("-k '%s': expected PAIRS or MIN:MAX, e.g. -k 4:64", v);
                    memcpy(lo, v, n);
                    lo[n] = 0;
                    o.Pmin = parse_long("-k (MIN)", lo, 1, 1L << 20);
                    o.P = parse_long("-k (MAX)", colon + 1, 1, 1L << 20);
                    if (o.Pmin > o.P) die("-k %ld:%ld: MIN is larger than MAX", o.Pmin, o.P);
                } else {
                    o.P = parse_long("-k", v, 1, 1L << 20);
                }
                break;
            }
            case 'q': o.Q = parse_long("-q", v, 1, 1L << 20); break;
            case 'd': o.digits = parse_long("-d", v, 1, 18); break;
            case 'D': o.depth = parse_double("-D", v, 0, 1); break;
            case 'f': if (!v) die("-f needs a value"); o.filler = v; break;
            default: die("unknown option '%s' (see -h)", a);
        }
        i++;
    }
    if (!o.prefix) die("no output prefix given (-o PREFIX)");
    if (o.ntrain < 0) o.ntrain = mqar ? 20000 : 2000;
    if (o.nval < 0) o.nval = mqar ? 1000 : 200;
    if (o.T < 0) o.T = mqar ? 64 : 1024;
    if (o.Pmin < 0) o.Pmin = o.P;
    char tpath[4200];
    snprintf(tpath, sizeof tpath, "%s_tokenizer.bin", o.prefix);
    GenFn gen;
    uint16_t filler_tok;
    if (mqar) {
        if (o.V > 65536) die("-V %ld: token ids up to %ld do not fit uint16 (max vocab 65536)", o.V, o.V - 1);
        long K = mqar_nkeys(&o), NV = o.V - 1 - K;
        if (o.P > K || o.P > NV)
            die("-k %ld pairs need %ld distinct keys and values, but -V %ld gives %ld keys and %ld values",
                o.P, o.P, o.V, K, NV);
        if (o.Q > o.P) die("-q %ld queries > -k %ld pairs (each query is a distinct key)", o.Q, o.P);
        if (2 * (o.P + o.Q) > o.T)
            die("-T %ld is too short: %ld pairs + %ld queries need %ld tokens", o.T, o.P, o.Q, 2 * (o.P + o.Q));
        gen = gen_mqar;
        filler_tok = 0;
    } else {
        if (strcmp(o.filler, "words") && strcmp(o.filler, "repeat")) die("-f: unknown filler '%s' (words or repeat)", o.filler);
        long need = (long)(niah_needle_len(&o) + niah_query_len(&o));
        if (o.T < need + 64) die("-T %ld is too short for niah (at least %ld bytes)", o.T, need + 64);
        gen = gen_niah;
        filler_tok = '\n';
    }
    if (o.shard < o.T + 1) die("-s %ld must hold at least one example (T+1 = %ld tokens)", o.shard, o.T + 1);

    if (mqar) mqar_tokenizer(&o, tpath);
    else write_byte_tokenizer(tpath);
    long ntr, nva = 0;
    write_split(&o, "train", o.ntrain, 1, gen, filler_tok, &ntr);
    if (o.nval > 0) write_split(&o, "val", o.nval, 2, gen, filler_tok, &nva);

    printf("synth %s: %ld train + %ld val examples of T=%ld tokens (%d + %d shards, each examples*T+1 tokens)\n",
           o.task, o.ntrain, o.nval, o.T, (int)ntr, (int)nva);
    if (mqar) {
        long NV = o.V - 1 - mqar_nkeys(&o);
        if (o.Pmin < o.P)
            printf("synth mqar: vocab %ld (pad 0, keys 1..%ld, values %ld..%ld), %ld..%ld pairs (uniform), "
                   "min(%ld, pairs) queries and answer tokens per example\n",
                   o.V, mqar_nkeys(&o), mqar_nkeys(&o) + 1, o.V - 1, o.Pmin, o.P, o.Q);
        else
            printf("synth mqar: vocab %ld (pad 0, keys 1..%ld, values %ld..%ld), %ld pairs, %ld queries, "
                   "%ld answer tokens per example\n",
                   o.V, mqar_nkeys(&o), mqar_nkeys(&o) + 1, o.V - 1, o.P, o.Q, o.Q);
        printf("synth mqar: chance accuracy = 1/%ld = %.6f\n", NV, 1.0 / (double)NV);
    } else {
        printf("synth niah: byte-level (vocab 256), %ld-digit passkey, filler %s, depth %s; %ld answer tokens per example\n",
               o.digits, o.filler, o.depth >= 0 ? "fixed" : "random", o.digits);
        double space = 9;  // passkeys: first digit 1-9, then 0-9
        for (long i = 1; i < o.digits; i++) space *= 10;
        printf("synth niah: chance accuracy per answer digit = 0.1 (whole passkey 1/%.0f)\n", space);
    }
    printf("synth: wrote %s_{train,val}_*.{bin,mask} and %s; train with -T %ld (one example per row)\n",
           o.prefix, tpath, o.T);
    return 0;
}
