// dev/fuzz/gpt2_valid.h: a small valid pair of GPT-2 files, for fuzz_gpt2.c and its seeds (make_seeds.c): the
// 256 single-byte tokens of GPT-2's byte alphabet (ids 0..255 in byte order) plus "Ġt", "he", "Ġthe" (256..258),
// and the three merges that make them.
#ifndef MIRAS_GPT2_VALID_H
#define MIRAS_GPT2_VALID_H
#include <stdio.h>
#include <string.h>
// the UTF-8 of byte b's character in GPT-2's alphabet (printable bytes stand for themselves, the others for
// U+0100 onwards in byte order)
static size_t alphabet_utf8(int b, char* out) {
    static int cp[256];
    if (!cp[0]) {
        int n = 0;
        for (int i = 0; i < 256; i++) {
            int printable = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE);
            cp[i] = printable ? i : 256 + n++;
        }
    }
    int c = cp[b];
    if (c < 0x80) { out[0] = (char)c; return 1; }
    out[0] = (char)(0xC0 | (c >> 6)); out[1] = (char)(0x80 | (c & 0x3F)); return 2;
}
static size_t gpt2_valid_encoder(char* s, size_t cap) {
    size_t n = (size_t)snprintf(s, cap, "{");
    for (int b = 0; b < 256; b++) {
        char u[2]; size_t l = alphabet_utf8(b, u);
        n += (size_t)snprintf(s + n, cap - n, "%s\"", b ? ", " : "");
        if (u[0] == '"' || u[0] == '\\') s[n++] = '\\';
        memcpy(s + n, u, l); n += l;
        n += (size_t)snprintf(s + n, cap - n, "\": %d", b);
    }
    // "Ġt" (space t), "he", "Ġthe"; Ġ is the space's character, U+0120
    n += (size_t)snprintf(s + n, cap - n, ", \"\xc4\xa0t\": 256, \"he\": 257, \"\xc4\xa0the\": 258}");
    return n;
}
static const char GPT2_VALID_MERGES[] = "#version: 0.2\n\xc4\xa0 t\nh e\n\xc4\xa0t he\n";

#endif
