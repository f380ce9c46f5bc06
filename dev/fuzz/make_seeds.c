// dev/fuzz/make_seeds.c: writes the seed corpora of the fuzz targets (small valid files, made with the trainer's
// own writers) into DIR/<target>/:  make_seeds DIR
#define TESTING
#include "../../train_miras.c"
#include "gpt2_valid.h"

static char g_dir[1024];
static void out_path(char* p, size_t cap, const char* target, const char* name) {
    char d[1200]; snprintf(d, sizeof d, "%s/%s", g_dir, target); mkdir(d, 0755);
    snprintf(p, cap, "%s/%s", d, name);
}
static void write_bytes(const char* target, const char* name, const void* a, size_t na, const void* b, size_t nb) {
    char p[1400]; out_path(p, sizeof p, target, name);
    FILE* f = fopen(p, "wb"); if (!f) DIE("check the seed directory", "cannot write %s", p);
    if (na) fwrite(a, 1, na, f);
    if (nb) fwrite(b, 1, nb, f);
    fclose(f);
}
// a tiny model of a preset: V 16 (Vp 64), D 4, L 1, H 1 (E 1, F 4, chunk 2, conv 4)
static Config tiny(const char* preset, int rank, int L) {
    Config c; memset(&c, 0, sizeof c); preset_config(&c, preset);
    c.V = 16; c.Vp = 64; c.D = 4; c.L = L; c.H = L == 1 ? 1 : 2; c.E = 1; c.F = 4; c.K = 4; c.b = c.b > 1 ? 2 : 1; c.gate_rank = rank;
    memset(c.pattern, 'M', L); c.pattern[L] = 0;
    return c;
}

int main(int argc, char** argv) {
    if (argc != 2) { fprintf(stderr, "usage: make_seeds DIR\n"); return 1; }
    snprintf(g_dir, sizeof g_dir, "%s", argv[1]); mkdir(g_dir, 0755);
    // token shards (20 and 7 tokens; 7 = one batch of B 2, T 3 plus one) and answer masks
    int h[256] = {0}; uint16_t t[20]; uint8_t m[20];
    for (int i = 0; i < 20; i++) { t[i] = (uint16_t)((i * 5) % 16); m[i] = i % 4 == 3; }
    h[0] = SHARD_MAGIC; h[1] = 1; h[2] = 20; write_bytes("shard", "s20.bin", h, 1024, t, 40);
    h[2] = 7; write_bytes("shard", "s7.bin", h, 1024, t, 14);
    h[0] = MASK_MAGIC; h[1] = 1; h[2] = 20; write_bytes("mask", "m20.mask", h, 1024, m, 20);
    // tokenizers: 16 tokens of 1..3 bytes (version 2 with an EOT, version 1), and a byte-level one
    uint32_t th[256] = {0}; uint8_t body[2048]; size_t nb = 0;
    for (int i = 0; i < 16; i++) { int len = 1 + i % 3; body[nb++] = (uint8_t)len; for (int j = 0; j < len; j++) body[nb++] = (uint8_t)('a' + i + j); }
    th[0] = TOKENIZER_MAGIC; th[1] = 2; th[2] = 16; th[3] = 15; write_bytes("tokenizer", "v2.bin", th, 1024, body, nb);
    th[1] = 1; th[3] = 0; write_bytes("tokenizer", "v1.bin", th, 1024, body, nb);
    nb = 0; for (int i = 0; i < 256; i++) { body[nb++] = 1; body[nb++] = (uint8_t)i; }
    th[1] = 2; th[2] = 256; th[3] = (uint32_t)-1; write_bytes("tokenizer", "bytes.bin", th, 1024, body, nb);
    // checkpoints (with and without a training state) and fixture-layout files, one per kind of memory
    struct { const char* preset; int rank, L; } kinds[] = {{"titans", 0, 1}, {"linear_attn", 0, 1}, {"deltanet", 0, 1}, {"moneta", 0, 1},
                                                           {"memora", 2, 1}, {"yaad", 2, 2}, {"ttt_mlp", 0, 1}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        Config c = tiny(kinds[k].preset, kinds[k].rank, kinds[k].L);
        Model M; model_build(&M, &c); model_init(&M, 7 + k);
        int in[4] = {1, 5, 9, 13}, tg[4] = {5, 9, 13, 2};
        model_forward(&M, in, tg, 1, 4); model_zero_grad(&M); model_backward(&M, 1); model_update(&M, 1e-3, 0.9, 0.95, 1e-8, 0.1);
        char p[1400], name[64]; TrainState st = {3, 0, 6, 12345};
        snprintf(name, sizeof name, "%s_state.bin", kinds[k].preset); out_path(p, sizeof p, "checkpoint", name); save_checkpoint(&M, p, &st);
        snprintf(name, sizeof name, "%s.bin", kinds[k].preset); out_path(p, sizeof p, "checkpoint", name); save_checkpoint(&M, p, NULL);
        // fixture layout: the model header with magic 20261103 and the batch (B 1, T 4, 2 steps), params, tokens
        int fh[256] = {0}; fh[0] = FIXTURE_MAGIC; fh[1] = 1; config_to_header(fh, &c, M.num_params);
        fh[100] = 1; fh[101] = 4; fh[102] = 2; fh[103] = f32_bits(1e-3f); fh[104] = f32_bits(0.9f); fh[105] = f32_bits(0.95f);
        fh[106] = f32_bits(1e-8f); fh[107] = f32_bits(0.1f); fh[108] = f32_bits(1.0f);
        snprintf(name, sizeof name, "%s.bin", kinds[k].preset); out_path(p, sizeof p, "fixture", name);
        FILE* f = fopen(p, "wb"); int tok[5] = {1, 5, 9, 13, 2};
        fwrite(fh, 4, 256, f); write_reals(f, M.params_memory, M.num_params); fwrite(tok, 4, 5, f); fclose(f);
        model_free(&M);
    }
    // shard2text: the first byte picks the file (0 tokenizer, 1 shard, 2 mask)
    {
        uint8_t buf[4096]; int32_t* b = (int32_t*)(buf + 1); memset(buf, 0, sizeof buf);
        buf[0] = 0; memcpy(buf + 1, th, 1024); ((uint32_t*)(buf + 1))[2] = 4; memcpy(buf + 1025, "\1a\2bc\0\1d", 8);
        write_bytes("shard2text", "tok.bin", buf, 1033, NULL, 0);
        memset(buf, 0, sizeof buf); buf[0] = 1; b[0] = SHARD_MAGIC; b[1] = 1; b[2] = 12;
        for (int i = 0; i < 12; i++) buf[1025 + 2 * i] = (uint8_t)(i % 4);
        write_bytes("shard2text", "shard.bin", buf, 1025 + 24, NULL, 0);
        memset(buf, 0, sizeof buf); buf[0] = 2; b[0] = MASK_MAGIC; b[1] = 1; b[2] = 12;
        for (int i = 0; i < 12; i++) buf[1025 + i] = (uint8_t)(i % 2);
        write_bytes("shard2text", "mask.bin", buf, 1025 + 12, NULL, 0);
    }
    // gpt2: the first byte picks the file (0 encoder.json, 1 vocab.bpe, 2 the text); the valid pair of gpt2_valid.h
    {
        static char enc[8192]; enc[0] = 0;
        size_t n = gpt2_valid_encoder(enc + 1, sizeof enc - 1);
        write_bytes("gpt2", "encoder.bin", enc, n + 1, NULL, 0);
        write_bytes("gpt2", "merges.bin", "\1", 1, GPT2_VALID_MERGES, sizeof GPT2_VALID_MERGES - 1);
        const char text[] = "\2 the cat's hat: they'll see 12,345 caf\xc3\xa9s\n\n  \t\xff\xfe end";
        write_bytes("gpt2", "text.bin", text, sizeof text - 1, NULL, 0);
    }
    return 0;
}
