/* jpegxr.c — JPEG XR (ITU-T T.832) streams through jxrlib (Debian libjxr-dev), as Zeiss CZI
 * subblocks store them: 8-bit grey, BGR or RGB (24 or 32 bits a pixel) decoded into a
 * caller's buffer as grey or BGR bytes (see codec.h). jxrlib's headers stay in this file: their
 * Windows-style types and macros must not reach the rest of the library.
 *
 * jxrlib does not survive damaged streams (fuzz/fuzz_czi.c crashed it within a few hundred
 * inputs: wild reads in DecodeSignificantRun), and a file's bytes are untrusted. So each stream
 * is decoded in a child process forked for it, into memory shared with the parent; a child that
 * dies (a signal, a bad exit, CPU_SECONDS of CPU spent) makes the subblock corrupt, never the
 * caller's process, and a stream that loops cannot hang the read. The child only decodes,
 * allocates (glibc's malloc is fork-safe) and calls _exit. Built without
 * jxrlib (SP_WITH_JXR unset: CMakeLists.txt), the decoder refuses every stream, naming it.
 */
#include "codecs/codec.h"

#ifndef SP_WITH_JXR

bool sp_jxr_available(void) {
    return false;
}

sp_status sp_jxr_decode(const uint8_t *data, size_t len, uint32_t width, uint32_t height,
                        unsigned samples, uint8_t *out, size_t stride, sp_err *err) {
    (void)data, (void)len, (void)width, (void)height, (void)samples, (void)out, (void)stride;
    return sp_err_set(err, SP_E_UNSUPPORTED,
                      "JPEG XR subblocks are not supported: slidepipe was built without jxrlib "
                      "(Debian libjxr-dev)");
}

#else

#include <JXRGlue.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* The CPU time a child may spend on one stream before the kernel stops it. */
#define CPU_SECONDS 20

/* jxrlib writes whole macroblock rows: the scratch image is padded to them. */
#define MACROBLOCK 16

/* Every 8-bit pixel format of the Windows Media Photo family shares these first 15 bytes of its
 * GUID; the last byte names the format. */
static const uint8_t FORMAT_PREFIX[15] = {0x24, 0xc3, 0xdd, 0x6f, 0x03, 0x4e, 0xfe, 0x4b,
                                          0xb1, 0x85, 0x3d, 0x77, 0x76, 0x8d, 0xc9};
enum { FMT_GRAY8 = 0x08, FMT_BGR24 = 0x0c, FMT_RGB24 = 0x0d, FMT_BGR32 = 0x0e, FMT_BGRA32 = 0x0f };

/* The GUID's bytes as stored in memory (Data1, Data2, Data3 little-endian on x86). */
static int format_code(const PKPixelFormatGUID *g) {
    uint8_t bytes[16];
    memcpy(bytes, &g->Data1, 4);
    memcpy(bytes + 4, &g->Data2, 2);
    memcpy(bytes + 6, &g->Data3, 2);
    memcpy(bytes + 8, g->Data4, 8);
    return memcmp(bytes, FORMAT_PREFIX, sizeof FORMAT_PREFIX) == 0 ? bytes[15] : -1;
}

static int format_bytes(int code) {
    switch (code) {
    case FMT_GRAY8: return 1;
    case FMT_BGR24:
    case FMT_RGB24: return 3;
    case FMT_BGR32:
    case FMT_BGRA32: return 4;
    default: return 0;
    }
}

/* The decode itself (in the child). */
static sp_status decode(const uint8_t *data, size_t len, uint32_t width, uint32_t height,
                        unsigned samples, uint8_t *out, size_t stride, sp_err *err) {
    struct WMPStream *stream = NULL;
    PKImageDecode *decoder = NULL;
    uint8_t *scratch = NULL;
    sp_status st = SP_OK;
    I32 w = 0, h = 0;
    PKPixelFormatGUID format;
    int code = -1;
    if (Failed(CreateWS_Memory(&stream, (void *)data, len)) ||
        Failed(PKImageDecode_Create_WMP(&decoder))) {
        st = sp_err_set(err, SP_E_NOMEM, "JPEG XR: out of memory for the decoder");
    } else if (Failed(decoder->Initialize(decoder, stream)) ||
               (decoder->WMP.wmiSCP.uAlphaMode = decoder->WMP.bHasAlpha ? 2 : 0, false) ||
               Failed(decoder->GetSize(decoder, &w, &h)) ||
               Failed(decoder->GetPixelFormat(decoder, &format))) {
        st = sp_err_set(err, SP_E_CORRUPT, "JPEG XR: not a decodable stream");
    } else if ((code = format_code(&format)) < 0 || format_bytes(code) == 0) {
        st = sp_err_set(err, SP_E_UNSUPPORTED,
                        "JPEG XR: pixel format other than 8-bit grey, BGR or RGB");
    } else if ((format_bytes(code) == 1) != (samples == 1)) {
        st = sp_err_set(err, SP_E_CORRUPT, "JPEG XR: %s pixels where %s ones were expected",
                        format_bytes(code) == 1 ? "grey" : "colour",
                        samples == 1 ? "grey" : "colour");
    } else if ((uint32_t)w != width || (uint32_t)h != height) {
        st = sp_err_set(err, SP_E_CORRUPT, "JPEG XR: the stream is %d x %d, not %u x %u", (int)w,
                        (int)h, width, height);
    }
    const int bpp = format_bytes(code);
    const size_t pitch = ((size_t)width * (size_t)(bpp > 0 ? bpp : 1) + 15) / 16 * 16;
    const size_t rows = ((size_t)height + MACROBLOCK - 1) / MACROBLOCK * MACROBLOCK;
    if (st == SP_OK && (scratch = calloc(rows, pitch)) == NULL) {
        st =
            sp_err_set(err, SP_E_NOMEM, "JPEG XR: out of memory for %u x %u pixels", width, height);
    }
    if (st == SP_OK) {
        PKRect rect = {0, 0, w, h};
        if (Failed(decoder->Copy(decoder, &rect, scratch, (U32)pitch))) {
            st = sp_err_set(err, SP_E_CORRUPT, "JPEG XR: the stream's data are damaged");
        }
    }
    for (uint32_t y = 0; st == SP_OK && y < height; y++) {
        const uint8_t *s = scratch + (size_t)y * pitch;
        uint8_t *d = out + (size_t)y * stride;
        if (samples == 1) {
            memcpy(d, s, width);
            continue;
        }
        for (uint32_t x = 0; x < width; x++, s += bpp, d += 3) {
            if (code == FMT_RGB24) {
                d[0] = s[2], d[1] = s[1], d[2] = s[0];
            } else {
                d[0] = s[0], d[1] = s[1], d[2] = s[2];
            }
        }
    }
    free(scratch);
    if (decoder != NULL) {
        decoder->Release(&decoder);
    }
    if (stream != NULL) {
        stream->Close(&stream);
    }
    return st;
}

/* What the child hands back, before the pixels in the shared mapping. */
typedef struct jxr_result {
    sp_err err;
    sp_status status;
    volatile int done; /* set last: the child got through (for a host that reaps children) */
} jxr_result;

sp_status sp_jxr_decode(const uint8_t *data, size_t len, uint32_t width, uint32_t height,
                        unsigned samples, uint8_t *out, size_t stride, sp_err *err) {
    if (data == NULL || out == NULL || (samples != 1 && samples != 3) || width == 0 ||
        height == 0 || stride < (size_t)width * samples) {
        return sp_err_set(err, SP_E_INVALID_ARG, "JPEG XR: bad arguments");
    }
    const size_t head = (sizeof(jxr_result) + 63) / 64 * 64;
    const size_t pixels = (size_t)height * stride;
    void *shared =
        mmap(NULL, head + pixels, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        return sp_err_set(err, SP_E_NOMEM, "JPEG XR: out of memory for %u x %u pixels", width,
                          height);
    }
    jxr_result *result = shared;
    result->status = SP_E_CORRUPT;
    pid_t child = fork();
    if (child == 0) {
        /* A crash in jxrlib ends the child by its signal, quietly: not through the handlers
         * inherited from the host (a sanitizer's or a fuzzer's report, an application's own). */
        static const int FATAL[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
        for (size_t i = 0; i < sizeof FATAL / sizeof *FATAL; i++) {
            signal(FATAL[i], SIG_DFL);
        }
        /* A stream that sends the decoder round in circles ends too: a subblock takes well
         * under a second of CPU; past CPU_SECONDS the kernel stops the child (SIGXCPU, then
         * SIGKILL a second later), and the read fails as for a crash. */
        struct rlimit cpu = {CPU_SECONDS, CPU_SECONDS + 1};
        setrlimit(RLIMIT_CPU, &cpu);
        signal(SIGXCPU, SIG_DFL);
        sp_err child_err = {0};
        result->status =
            decode(data, len, width, height, samples, (uint8_t *)shared + head, stride, &child_err);
        result->err = child_err;
        __atomic_store_n(&result->done, 1, __ATOMIC_RELEASE);
        _exit(0);
    }
    sp_status st = SP_OK;
    int how = 0;
    pid_t waited = -1;
    if (child < 0) {
        st = sp_err_set(err, SP_E_IO, "JPEG XR: cannot start the decoding process");
    } else {
        while ((waited = waitpid(child, &how, 0)) < 0 && errno == EINTR) {
        }
    }
    /* A host that ignores SIGCHLD or reaps every child leaves waitpid nothing (ECHILD): then
     * the child's own mark says whether it got through. */
    bool reaped = waited < 0 && errno == ECHILD;
    bool finished = reaped ? __atomic_load_n(&result->done, __ATOMIC_ACQUIRE) == 1
                           : waited == child && WIFEXITED(how) && WEXITSTATUS(how) == 0;
    if (st == SP_OK && !finished) {
        st = sp_err_set(err, SP_E_CORRUPT, "JPEG XR: the decoder failed on a damaged stream%s",
                        waited == child && WIFSIGNALED(how) ? " (it crashed)" : "");
    } else if (st == SP_OK && result->status != SP_OK) {
        st = sp_err_set(err, result->status, "%s", result->err.msg);
    } else if (st == SP_OK) {
        for (uint32_t y = 0; y < height; y++) {
            memcpy(out + (size_t)y * stride, (uint8_t *)shared + head + (size_t)y * stride,
                   (size_t)width * samples);
        }
    }
    munmap(shared, head + pixels);
    return st;
}

bool sp_jxr_available(void) {
    return true;
}

#endif
