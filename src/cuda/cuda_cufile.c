/* cuda_cufile.c — stored rows of uncompressed tiles read from the file straight into device
 * memory with cuFile (GPUDirect Storage), for cuda_raw_tiles.c. With GDS (the nvidia-fs driver
 * and a filesystem that supports it) the storage writes into GPU memory itself and the host
 * copies nothing; without it cuFile runs in its compatibility mode (POSIX reads through its own
 * bounce buffers), which is no better than the pinned path it would replace. So it is used only
 * when asked for (SLIDEPIPE_CUFILE=1, docs/gpu.md), until a run on a GPU machine shows where it
 * pays; bench/bench_gpu.sh times both.
 *
 * libcufile is never linked: its functions are looked up once per process (cuda_libs.c finds
 * the library), with the few types they take declared here from the cuFile API reference, and
 * the driver is opened once. Each context keeps one file registered: the slide's file, opened
 * again with O_DIRECT where the filesystem allows it (io/direct_file.h), so it is the very file
 * the slide reads, and two device buffers that the reads fill in turn. */
#include "cuda/cuda_cufile.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "cuda/cuda_testing.h"
#include "io/direct_file.h"

/* CUfileError_t: the cuFile status (0 = CU_FILE_SUCCESS) and the CUDA driver's. */
typedef struct {
    int err;
    int cu_err;
} cufile_error;

/* CUfileDescr_t for a Linux descriptor (type CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1). */
typedef struct {
    int type;
    union {
        int fd;
        void *handle;
    } handle;
    const void *fs_ops;
} cufile_descr;

typedef struct cufile_api {
    cufile_error (*driver_open)(void);
    cufile_error (*handle_register)(void **fh, cufile_descr *descr);
    void (*handle_deregister)(void *fh);
    cufile_error (*buf_register)(const void *base, size_t length, int flags);
    cufile_error (*buf_deregister)(const void *base);
    ssize_t (*read)(void *fh, void *base, size_t size, off_t file_offset, off_t base_offset);
} cufile_api;

static cufile_api API;
static int API_OK;
static char API_WHY[200] = "not looked for yet";
static pthread_once_t API_ONCE = PTHREAD_ONCE_INIT;

/* Why the last read that asked for cuFile could not set it up (it read through pinned staging
 * instead); "" when none. */
static pthread_mutex_t WHY_LOCK = PTHREAD_MUTEX_INITIALIZER;
static char LAST_WHY[200];

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&WHY_LOCK);
    vsnprintf(LAST_WHY, sizeof LAST_WHY, fmt, ap);
    pthread_mutex_unlock(&WHY_LOCK);
    va_end(ap);
}

static void load_api(void) {
    static const char *const NAMES[] = {"cuFileDriverOpen",       "cuFileHandleRegister",
                                        "cuFileHandleDeregister", "cuFileBufRegister",
                                        "cuFileBufDeregister",    "cuFileRead"};
    void *slots[sizeof NAMES / sizeof NAMES[0]];
    _Static_assert(sizeof slots == sizeof API, "one symbol per member of cufile_api");
    if (!sp_cuda_library_symbols(SP_CUDA_LIB_CUFILE, NAMES, sizeof NAMES / sizeof NAMES[0], slots,
                                 API_WHY, sizeof API_WHY)) {
        return;
    }
    memcpy(&API, slots, sizeof API); /* function pointers, in the order of NAMES */
    cufile_error e = API.driver_open();
    if (e.err != 0) {
        snprintf(API_WHY, sizeof API_WHY, "cuFileDriverOpen failed (cuFile error %d, CUDA %d)",
                 e.err, e.cu_err);
        return;
    }
    snprintf(API_WHY, sizeof API_WHY, "driver open");
    API_OK = 1;
}

int sp_cuda_cufile_state(char *why, size_t why_len) {
    pthread_once(&API_ONCE, load_api);
    if (why != NULL && why_len > 0) {
        pthread_mutex_lock(&WHY_LOCK);
        snprintf(why, why_len, "%s%s%s", API_WHY, LAST_WHY[0] ? "; last: " : "", LAST_WHY);
        pthread_mutex_unlock(&WHY_LOCK);
    }
    return API_OK;
}

bool sp_cuda_cufile_wanted(void) {
    const char *v = getenv("SLIDEPIPE_CUFILE");
    return v != NULL && strcmp(v, "1") == 0;
}

struct sp_cufile {
    sp_file_id id; /* the registered file: the slide's */
    int fd; /* ours, opened again with O_DIRECT where the filesystem allows it; -1 for none */
    void *fh;
    uint8_t *buffer[2]; /* device memory, SP_CUDA_STAGING_BYTES each */
    bool registered[2]; /* buffer[i] registered with cuFileBufRegister */
};

static void forget_file(sp_cufile *c) {
    if (c->fh != NULL) {
        API.handle_deregister(c->fh);
        c->fh = NULL;
    }
    sp_direct_file_close(c->fd);
    c->fd = -1;
}

void sp_cuda_cufile_destroy(sp_cuda_context *ctx) {
    sp_cufile *c = ctx->cufile;
    if (c == NULL) {
        return;
    }
    forget_file(c);
    for (int i = 0; i < 2; i++) {
        if (c->registered[i]) {
            API.buf_deregister(c->buffer[i]);
        }
        cudaFree(c->buffer[i]);
    }
    free(c);
    ctx->cufile = NULL;
}

/* The context's cuFile state, with `slide_fd`'s file registered and the buffers allocated;
 * NULL with the reason noted (LAST_WHY). */
static sp_cufile *ready(sp_cuda_context *ctx, int slide_fd) {
    pthread_once(&API_ONCE, load_api);
    if (!API_OK) {
        note("%s", API_WHY);
        return NULL;
    }
    sp_file_id id;
    if (!sp_file_identity(slide_fd, &id)) {
        note("cannot stat the slide's file");
        return NULL;
    }
    sp_cufile *c = ctx->cufile;
    if (c == NULL) {
        c = calloc(1, sizeof *c);
        if (c == NULL) {
            note("out of memory");
            return NULL;
        }
        c->fd = -1;
        ctx->cufile = c;
    }
    for (int i = 0; i < 2; i++) {
        if (c->buffer[i] == NULL) {
            cudaError_t e = cudaMalloc((void **)&c->buffer[i], SP_CUDA_STAGING_BYTES);
            if (e != cudaSuccess) {
                c->buffer[i] = NULL;
                (void)cudaGetLastError();
                note("no device buffer: %s", cudaGetErrorString(e));
                return NULL;
            }
            /* Advice for GDS (its DMA targets pinned once); compatibility mode needs none. */
            c->registered[i] = API.buf_register(c->buffer[i], SP_CUDA_STAGING_BYTES, 0).err == 0;
        }
    }
    if (c->fh != NULL && c->id.device == id.device && c->id.inode == id.inode) {
        return c;
    }
    forget_file(c);
    c->fd = sp_direct_file_open(slide_fd);
    if (c->fd < 0) {
        note("cannot open the slide's file again");
        return NULL;
    }
    cufile_descr d = {.type = 1, .handle.fd = c->fd, .fs_ops = NULL};
    cufile_error e = API.handle_register(&c->fh, &d);
    if (e.err != 0) {
        c->fh = NULL;
        forget_file(c);
        note("cuFileHandleRegister failed (cuFile error %d)", e.err);
        return NULL;
    }
    c->id = id;
    return c;
}

uint8_t *sp_cuda_cufile_buffer(sp_cuda_context *ctx, int slide_fd, int which) {
    sp_cufile *c = ready(ctx, slide_fd);
    return c != NULL ? c->buffer[which & 1] : NULL;
}

sp_status sp_cuda_cufile_read(sp_cuda_context *ctx, int which, size_t at, uint64_t offset,
                              size_t len) {
    sp_cufile *c = ctx->cufile;
    if (c == NULL || c->fh == NULL || at > SP_CUDA_STAGING_BYTES ||
        len > SP_CUDA_STAGING_BYTES - at) {
        return sp_cuda_note_fallback("cuFile: read outside its buffer");
    }
    size_t done = 0;
    while (done < len) {
        ssize_t n = API.read(c->fh, c->buffer[which & 1], len - done, (off_t)(offset + done),
                             (off_t)(at + done));
        if (n <= 0) {
            return sp_cuda_note_fallback("cuFile: cuFileRead gave %zd at offset %llu", n,
                                         (unsigned long long)(offset + done));
        }
        done += (size_t)n;
    }
    return SP_OK;
}
