// dev/fuzz/fuzz.h: shared scaffolding of the libFuzzer targets (dev/fuzz/fuzz_*.c, README "Fuzzing").
//
// Each target includes the real parser (train_miras.c with TESTING, or data_prep/shard2text.c), writes the fuzz
// input to a file in a private temp dir and calls the parser on that path, as the trainer does.
//
// The parsers end a bad input with die() -> exit(1). Here the die hook (die_hook in train_miras.c, g_die_hook in
// data_prep/common.h) first checks the message, then longjmps back to the target instead of exiting, so one process
// runs millions of inputs and libFuzzer keeps its coverage. The check: one line, and for the trainer a hint
// (`error: ... (hint: ...)`); a violation aborts, which libFuzzer reports as a crash.
//
// A longjmp skips the parser's frees and fcloses, so everything the parser allocates or opens goes through the
// tracking shims below (macros over malloc/calloc/realloc/free/fopen/fclose, defined after the system headers and
// before the parser's source); fuzz_reset() frees and closes what is left after every input, error or not.
// Without that, file descriptors would run out after ~1000 errors and leaked buffers would look like an OOM.
#ifndef MIRAS_FUZZ_H
#define MIRAS_FUZZ_H
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdarg.h>
#include <math.h>
#include <tgmath.h>
#include <time.h>
#include <errno.h>
#include <glob.h>
#include <unistd.h>
#include <setjmp.h>
#include <sys/stat.h>

// ---- allocation tracking: a 16-byte header links every live block into one list (O(1) free)
typedef struct FzBlock { struct FzBlock *prev, *next; } FzBlock;
static FzBlock fz_blocks = {&fz_blocks, &fz_blocks};
static void* fz_link(FzBlock* b) {
    if (!b) return NULL;
    b->next = fz_blocks.next; b->prev = &fz_blocks; fz_blocks.next->prev = b; fz_blocks.next = b;
    return b + 1;
}
static FzBlock* fz_unlink(void* p) { FzBlock* b = (FzBlock*)p - 1; b->prev->next = b->next; b->next->prev = b->prev; return b; }
static void* fz_malloc(size_t n) { return n > SIZE_MAX - sizeof(FzBlock) ? NULL : fz_link((FzBlock*)malloc(sizeof(FzBlock) + n)); }
static void* fz_calloc(size_t n, size_t s) {
    size_t t; if (__builtin_mul_overflow(n, s, &t) || t > SIZE_MAX - sizeof(FzBlock)) return NULL;
    return fz_link((FzBlock*)calloc(1, sizeof(FzBlock) + t));
}
static void fz_free(void* p) { if (p) free(fz_unlink(p)); }
static void* fz_realloc(void* p, size_t n) {
    if (!p) return fz_malloc(n);
    if (n > SIZE_MAX - sizeof(FzBlock)) return NULL;
    FzBlock* b = fz_unlink(p); FzBlock* q = (FzBlock*)realloc(b, sizeof(FzBlock) + n);
    if (!q) { fz_link(b); return NULL; }
    return fz_link(q);
}
// ---- open files
#define FZ_MAXF 64
static FILE* fz_files[FZ_MAXF];
static FILE* fz_fopen(const char* path, const char* mode) {
    FILE* f = fopen(path, mode);
    if (!f) return NULL;
    for (int i = 0; i < FZ_MAXF; i++) if (!fz_files[i]) { fz_files[i] = f; return f; }
    fprintf(stderr, "fuzz: more than %d files open at once (a descriptor leak in the parser)\n", FZ_MAXF); abort();
}
static int fz_fclose(FILE* f) {
    for (int i = 0; i < FZ_MAXF; i++) if (fz_files[i] == f) fz_files[i] = NULL;
    return fclose(f);
}
// after every input: free every block and close every file the parser left behind
static void fuzz_reset(void) {
    while (fz_blocks.next != &fz_blocks) free(fz_unlink(fz_blocks.next + 1));
    for (int i = 0; i < FZ_MAXF; i++) if (fz_files[i]) { fclose(fz_files[i]); fz_files[i] = NULL; }
}

// ---- the temp dir and the input file
static char fz_dir[256];
static void fuzz_init_dir(void) {
    if (fz_dir[0]) return;
    const char* t = getenv("TMPDIR");
    snprintf(fz_dir, sizeof fz_dir, "%s/miras_fuzz_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(fz_dir)) { perror("fuzz: mkdtemp"); abort(); }
    if (!freopen("/dev/null", "w", stdout)) abort();   // parsers that print (shard2text, samples) print here
}
static void fuzz_path(char* out, size_t cap, const char* name) { snprintf(out, cap, "%s/%s", fz_dir, name); }
static void fuzz_write(const char* path, const void* data, size_t n) {
    FILE* f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) { perror("fuzz: writing the input"); abort(); }
}

// ---- the error line check and the way back
static jmp_buf fz_jmp;
static int fz_armed;
static void fuzz_check_line(const char* what, const char* s) {
    if (s && strchr(s, '\n')) { fprintf(stderr, "fuzz: the %s of an error spans more than one line: %s\n", what, s); abort(); }
}
// the die hook of the data_prep targets (data_prep/common.h's g_die_hook: one line, then back to the target)
static void fuzz_die_line(const char* msg) {
    fuzz_check_line("message", msg);
    if (!fz_armed) abort();
    longjmp(fz_jmp, 1);
}
#define FUZZ_TRY (fz_armed = 1, setjmp(fz_jmp) == 0)
#define FUZZ_DONE() do { fz_armed = 0; fuzz_reset(); } while (0)

// the shims take over from here on (the parser's source is included after this header)
#define malloc(n) fz_malloc(n)
#define calloc(n, s) fz_calloc(n, s)
#define realloc(p, n) fz_realloc(p, n)
#define free(p) fz_free(p)
#define fopen(p, m) fz_fopen(p, m)
#define fclose(f) fz_fclose(f)
#endif
