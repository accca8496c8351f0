/* test_faults.c — fault injection, as SQLite does it: the Nth allocation, or the Nth file-system
 * call (open, pread, write, pwrite, close, rename, fsync, syncfs, mkstemp, mkdir), that the
 * library makes fails, for every N until a run makes fewer calls than N.
 *
 * This binary is linked with the linker's --wrap for those functions (CMakeLists.txt), so every
 * call the library's objects make goes through the counters below; a call of the armed kind
 * whose number is N fails with NULL and ENOMEM, or -1 and EIO (close still closes the file). The
 * sweeps:
 * - opening and reading slides (Aperio JPEG and JPEG 2000, NDPI, a DICOM folder): each failed
 *   run must end in a clean error (a status and a message), or, where the library recovers,
 *   in the same pixels as a run without faults; never a crash;
 * - converting a slide to OME-Zarr: each failed run must end in a clean error and leave no
 *   completion marker (nothing torn: a store that says it is complete is), and --resume without
 *   faults must then finish it with the clean run's dataset hash and a clean verify;
 * - writing the synthetic slide (the TIFF writer): each failed run must end in a clean error
 *   with no file at the destination and no temporary file beside it.
 * Leaks are ASan's to find: this test runs under ASan+UBSan in `make test`. The counts are
 * printed ("faults: ..."), for docs/testing.md.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "slidepipe.h"
#include "unit.h"

/* ---- the counters ------------------------------------------------------------------------ */

enum { KIND_NONE, KIND_ALLOC, KIND_FILE };

static atomic_int armed = KIND_NONE;
static atomic_long calls; /* calls of the armed kind so far */
static long fail_at;      /* the call that fails (1-based) */

static bool fails(int kind) {
    return atomic_load(&armed) == kind && atomic_fetch_add(&calls, 1) + 1 == fail_at;
}

static void arm(int kind, long n) {
    atomic_store(&calls, 0);
    fail_at = n;
    atomic_store(&armed, kind);
}

/* Disarm; true when call number fail_at was made (and so failed). */
static bool disarm(void) {
    atomic_store(&armed, KIND_NONE);
    return atomic_load(&calls) >= fail_at;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_open(const char *path, int flags, ...);
int __real_openat(int dir, const char *path, int flags, ...);
ssize_t __real_pread(int fd, void *buf, size_t n, off_t at);
ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __real_pwrite(int fd, const void *buf, size_t n, off_t at);
int __real_close(int fd);
int __real_rename(const char *from, const char *to);
int __real_fsync(int fd);
int __real_syncfs(int fd);
int __real_mkstemp(char *tmpl);
int __real_mkdir(const char *path, mode_t mode);

#define FAIL_ALLOC()                                                                               \
    do {                                                                                           \
        if (fails(KIND_ALLOC)) {                                                                   \
            errno = ENOMEM;                                                                        \
            return NULL;                                                                           \
        }                                                                                          \
    } while (0)
#define FAIL_FILE()                                                                                \
    do {                                                                                           \
        if (fails(KIND_FILE)) {                                                                    \
            errno = EIO;                                                                           \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

void *__wrap_malloc(size_t n) {
    FAIL_ALLOC();
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t size) {
    FAIL_ALLOC();
    return __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t n) {
    FAIL_ALLOC();
    return __real_realloc(p, n);
}
char *__wrap_strdup(const char *s) {
    FAIL_ALLOC();
    return __real_strdup(s);
}
char *__wrap_strndup(const char *s, size_t n) {
    FAIL_ALLOC();
    return __real_strndup(s, n);
}
int __wrap_open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (flags & O_CREAT) ? (mode_t)va_arg(ap, int) : 0;
    va_end(ap);
    FAIL_FILE();
    return __real_open(path, flags, mode);
}
int __wrap_openat(int dir, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (flags & O_CREAT) ? (mode_t)va_arg(ap, int) : 0;
    va_end(ap);
    FAIL_FILE();
    return __real_openat(dir, path, flags, mode);
}
ssize_t __wrap_pread(int fd, void *buf, size_t n, off_t at) {
    FAIL_FILE();
    return __real_pread(fd, buf, n, at);
}
ssize_t __wrap_write(int fd, const void *buf, size_t n) {
    FAIL_FILE();
    return __real_write(fd, buf, n);
}
ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t at) {
    FAIL_FILE();
    return __real_pwrite(fd, buf, n, at);
}
int __wrap_close(int fd) {
    if (fails(KIND_FILE)) { /* as NFS reports a failed flush: the descriptor is gone all the same */
        __real_close(fd);
        errno = EIO;
        return -1;
    }
    return __real_close(fd);
}
int __wrap_rename(const char *from, const char *to) {
    FAIL_FILE();
    return __real_rename(from, to);
}
int __wrap_fsync(int fd) {
    FAIL_FILE();
    return __real_fsync(fd);
}
int __wrap_syncfs(int fd) {
    FAIL_FILE();
    return __real_syncfs(fd);
}
int __wrap_mkstemp(char *tmpl) {
    FAIL_FILE();
    return __real_mkstemp(tmpl);
}
int __wrap_mkdir(const char *path, mode_t mode) {
    FAIL_FILE();
    return __real_mkdir(path, mode);
}

/* ---- what a sweep found ------------------------------------------------------------------ */

typedef struct tally {
    long failed;    /* runs in which the Nth call failed */
    long clean;     /* ... that ended in an error with a message */
    long recovered; /* ... that succeeded all the same, with the right result */
    long wrong;     /* ... that succeeded with a wrong result, or failed without a message */
    long torn;      /* failed conversions that left a store marked complete */
} tally;

static void report(const char *what, const char *kind, const tally *t) {
    printf("faults: %s, %s: %ld calls failed, %ld clean errors, %ld recovered, %ld wrong, %ld "
           "torn\n",
           what, kind, t->failed, t->clean, t->recovered, t->wrong, t->torn);
}

/* ---- opening and reading a slide --------------------------------------------------------- */

#define READ_W 600
#define READ_H 400

/* Open `path`, read a region across several tiles of level 0 and the scaled overview of the
 * whole slide; the first failure's status, its message in msg. */
static sp_status open_and_read(const char *path, uint8_t *region, uint8_t *overview, char *msg,
                               size_t msg_len) {
    msg[0] = '\0';
    sp_slide *s = NULL;
    sp_status st = sp_slide_open(path, &s, msg, msg_len);
    int64_t w = 0, h = 0;
    if (st == SP_OK) {
        sp_slide_level_dimensions(s, 0, &w, &h);
        st = sp_slide_read_region(s, SP_PIXEL_RGBA8, region, READ_W * 4, 0, w / 3, h / 3, READ_W,
                                  READ_H);
    }
    if (st == SP_OK) {
        double d = (double)(w > h ? w : h) / 128.0;
        st = sp_slide_read_region_scaled(s, SP_PIXEL_RGBA8, overview, 128 * 4, d > 1 ? d : 1, 0, 0,
                                         128, 128);
    }
    if (st != SP_OK && s != NULL) {
        const char *e = sp_slide_error(s);
        snprintf(msg, msg_len, "%s", e != NULL ? e : "");
    }
    sp_slide_close(s);
    return st;
}

static void sweep_read(const char *path, int kind, const char *kind_name) {
    static uint8_t ref_region[READ_W * READ_H * 4], ref_overview[128 * 128 * 4];
    static uint8_t region[READ_W * READ_H * 4], overview[128 * 128 * 4];
    char msg[512];
    sp_status st = open_and_read(path, ref_region, ref_overview, msg, sizeof msg);
    CHECK(st == SP_OK);
    if (st != SP_OK) {
        fprintf(stderr, "%s: %s\n", path, msg);
        return;
    }
    tally t = {0};
    for (long n = 1;; n++) {
        arm(kind, n);
        st = open_and_read(path, region, overview, msg, sizeof msg);
        bool hit = disarm();
        bool same = memcmp(region, ref_region, sizeof region) == 0 &&
                    memcmp(overview, ref_overview, sizeof overview) == 0;
        if (!hit) {
            CHECK(st == SP_OK && same);
            break;
        }
        t.failed++;
        if (st != SP_OK && msg[0] != '\0') {
            t.clean++;
        } else if (st == SP_OK && same) {
            t.recovered++;
        } else {
            t.wrong++;
            fprintf(stderr, "%s: %s call %ld failed: status %d, message '%s', pixels %s\n", path,
                    kind_name, n, st, msg, same ? "right" : "wrong");
        }
    }
    CHECK(t.wrong == 0);
    CHECK(t.failed > 0);
    report(path, kind_name, &t);
}

/* ---- converting ---------------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_tree(const char *path) {
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static sp_status convert(sp_slide *s, const char *out, bool resume, char *hash, char *msg,
                         size_t msg_len) {
    sp_convert_options *o = NULL;
    sp_status st = sp_convert_options_create(&o);
    if (st == SP_OK) {
        sp_convert_options_set(o, SP_CONVERT_THREADS, 1);
        sp_convert_options_set(o, SP_CONVERT_CHUNK, 256);
        sp_convert_options_set(o, SP_CONVERT_RESUME, resume ? 1 : 0);
        st = sp_convert_to_zarr(s, out, o, NULL, NULL, hash, msg, msg_len);
    } else {
        snprintf(msg, msg_len, "no options: %s", sp_status_str(st));
    }
    sp_convert_options_destroy(o);
    return st;
}

static bool complete(const char *out) {
    char path[4200];
    snprintf(path, sizeof path, "%s/slidepipe-complete", out);
    return access(path, F_OK) == 0;
}

/* A conversion by a fresh handle (a failed read sticks to the handle that saw it, so a rerun
 * opens the slide again, as a new process would). */
static sp_status convert_slide(const char *slide_path, const char *out, bool resume, int kind,
                               long n, bool *hit, char *hash, char *msg, size_t msg_len) {
    sp_slide *s = NULL;
    sp_status st = sp_slide_open(slide_path, &s, msg, msg_len);
    if (st == SP_OK) {
        arm(kind, n);
        st = convert(s, out, resume, hash, msg, msg_len);
        *hit = disarm();
    }
    sp_slide_close(s);
    return st;
}

static void sweep_convert(const char *slide_path, const char *work, int kind,
                          const char *kind_name) {
    char msg[512], ref_hash[65] = "", hash[65], out[4096];
    bool hit = false;
    snprintf(out, sizeof out, "%s/reference.zarr", work);
    sp_status st =
        convert_slide(slide_path, out, false, KIND_NONE, 0, &hit, ref_hash, msg, sizeof msg);
    CHECK(st == SP_OK);
    remove_tree(out);
    tally t = {0};
    long resumed = 0;
    for (long n = 1; st == SP_OK; n++) {
        snprintf(out, sizeof out, "%s/run-%ld.zarr", work, n);
        hash[0] = '\0';
        sp_status run = convert_slide(slide_path, out, false, kind, n, &hit, hash, msg, sizeof msg);
        if (!hit) {
            CHECK(run == SP_OK && strcmp(hash, ref_hash) == 0);
            remove_tree(out);
            break;
        }
        t.failed++;
        bool torn = run != SP_OK && complete(out);
        bool wrong = run == SP_OK ? strcmp(hash, ref_hash) != 0 : msg[0] == '\0';
        if (torn || wrong) {
            fprintf(stderr, "%s: %s call %ld failed: status %d, message '%s', hash %s%s\n",
                    slide_path, kind_name, n, run, msg, hash, torn ? ", marked complete" : "");
        }
        if (run == SP_OK) {
            t.recovered += !wrong;
            t.wrong += wrong;
        } else {
            t.clean += !wrong;
            t.wrong += wrong;
            t.torn += torn;
            char again[65] = "";
            bool ignored;
            sp_status r = convert_slide(slide_path, out, true, KIND_NONE, 0, &ignored, again, msg,
                                        sizeof msg);
            int64_t problems = -1;
            bool resumed_ok =
                r == SP_OK && strcmp(again, ref_hash) == 0 &&
                sp_zarr_verify(out, NULL, NULL, &problems, NULL, NULL, msg, sizeof msg) == SP_OK &&
                problems == 0;
            if (!resumed_ok) {
                fprintf(stderr, "%s: %s call %ld: resume gave status %d, hash %s (want %s): %s\n",
                        slide_path, kind_name, n, r, again, ref_hash, msg);
            }
            CHECK(resumed_ok);
            resumed += resumed_ok;
        }
        remove_tree(out);
    }
    CHECK(t.wrong == 0 && t.torn == 0 && t.failed > 0);
    report(slide_path, kind_name, &t);
    printf("faults: %s, %s: %ld interrupted conversions completed by --resume\n", slide_path,
           kind_name, resumed);
}

/* ---- writing a TIFF ------------------------------------------------------------------------ */

/* Entries in `dir` (the scratch folder, which holds nothing else while this runs). */
static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

static void sweep_synth(const char *work, int kind, const char *kind_name) {
    char out[4200], msg[512];
    snprintf(out, sizeof out, "%s/synth.tif", work);
    tally t = {0};
    for (long n = 1;; n++) {
        msg[0] = '\0';
        arm(kind, n);
        sp_status st = sp_synth_write(out, 512, 7, msg, sizeof msg);
        bool hit = disarm();
        bool exists = access(out, F_OK) == 0;
        if (!hit) {
            CHECK(st == SP_OK && exists);
            remove(out);
            break;
        }
        t.failed++;
        int left = count_files(work) - (exists ? 1 : 0);
        bool clean = st != SP_OK && msg[0] != '\0' && !exists && left == 0;
        t.clean += clean;
        t.recovered += st == SP_OK && exists && left == 0;
        t.wrong += st == SP_OK ? !exists : !clean;
        t.torn += st != SP_OK && exists;
        if (!clean && st != SP_OK) {
            fprintf(stderr, "synth: %s call %ld: status %d, message '%s', file %s, %d left\n",
                    kind_name, n, st, msg, exists ? "there" : "absent", left);
        }
        remove(out);
    }
    CHECK(t.wrong == 0 && t.torn == 0 && t.failed > 0);
    report("sp_synth_write 512", kind_name, &t);
}

/* ---- the sweeps ---------------------------------------------------------------------------- */

void unit_run(void) {
    const char *data = unit_testdata();
    if (data == NULL) {
        unit_skip("../shared/testdata is not there: the sweeps read its slides");
        return;
    }
    sp_cache_set_capacity(0); /* every run decodes (and reads) its tiles again */
    static const char *const slides[] = {
        "aperio/CMU-1-Small-Region.svs",
        "aperio/tcga-cr-7395-01a-01-ts1.svs",
        "ndpi/test3-DAPI-2-387.ndpi",
        "dicom/cmu-1-small-region",
    };
    char path[4096];
    for (size_t i = 0; i < sizeof slides / sizeof slides[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", data, slides[i]);
        sweep_read(path, KIND_FILE, "file calls");
        sweep_read(path, KIND_ALLOC, "allocations");
    }
    char work[] = "/tmp/slidepipe-faults.XXXXXX";
    if (mkdtemp(work) == NULL) {
        CHECK(!"a scratch folder");
        return;
    }
    snprintf(path, sizeof path, "%s/generic-tiff/boxes.tiff", data);
    sweep_convert(path, work, KIND_FILE, "file calls");
    sweep_convert(path, work, KIND_ALLOC, "allocations");
    sweep_synth(work, KIND_FILE, "file calls");
    sweep_synth(work, KIND_ALLOC, "allocations");
    remove_tree(work);
}
