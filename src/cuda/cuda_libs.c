/* cuda_libs.c — finding the GPU libraries that slidepipe uses but never links: nvJPEG (JPEG
 * decoding on the GPU), cuFile (GPUDirect Storage), cuFFT (spectra) and nvJPEG2000 (JPEG 2000
 * decoding on the GPU). Each is looked for once
 * per process, in SLIDEPIPE_CUDA_LIBS (a folder, e.g. a pip wheel's nvidia/cu13/lib), then
 * wherever the dynamic loader looks, then in the CUDA toolkit's /usr/local/cuda/lib64, under the
 * sonames of the CUDA 13 and 12 releases. What was found (file,
 * version) or why not is kept for `slidepipe gpu` and for the paths that use them. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slidepipe.h"

typedef struct gpu_library {
    const char *label;
    const char *sonames[4];
    const char *probe; /* a symbol that must be there */
    void *handle;
    char detail[1400];
} gpu_library;

static gpu_library LIBRARIES[] = {
    [SP_CUDA_LIB_NVJPEG] = {"nvJPEG",
                            {"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so", NULL},
                            "nvjpegCreateEx",
                            NULL,
                            ""},
    [SP_CUDA_LIB_CUFILE] = {"cuFile",
                            {"libcufile.so.0", "libcufile.so", NULL, NULL},
                            "cuFileHandleRegister",
                            NULL,
                            ""},
    [SP_CUDA_LIB_CUFFT] = {"cuFFT",
                           {"libcufft.so.12", "libcufft.so.11", "libcufft.so", NULL},
                           "cufftPlanMany",
                           NULL,
                           ""},
    [SP_CUDA_LIB_NVJPEG2K] = {"nvJPEG2000",
                              {"libnvjpeg2k.so.0", "libnvjpeg2k.so", NULL, NULL},
                              "nvjpeg2kCreateSimple",
                              NULL,
                              ""},
};
static pthread_once_t LOOKED = PTHREAD_ONCE_INIT;

/* nvjpegGetProperty and nvjpeg2kGetProperty(MAJOR_VERSION = 0 / MINOR_VERSION = 1 /
 * PATCH_LEVEL = 2, int *). */
typedef int (*nvjpeg_get_property_fn)(int type, int *value);

static void describe_version(gpu_library *lib, const char *file) {
    nvjpeg_get_property_fn get = NULL;
    if (lib == &LIBRARIES[SP_CUDA_LIB_NVJPEG]) {
        *(void **)&get = dlsym(lib->handle, "nvjpegGetProperty");
    } else if (lib == &LIBRARIES[SP_CUDA_LIB_NVJPEG2K]) {
        *(void **)&get = dlsym(lib->handle, "nvjpeg2kGetProperty");
    }
    int v[3] = {0, 0, 0};
    if (get != NULL && get(0, &v[0]) == 0 && get(1, &v[1]) == 0 && get(2, &v[2]) == 0) {
        snprintf(lib->detail, sizeof lib->detail, "%.1024s %d.%d.%d", file, v[0], v[1], v[2]);
    } else {
        snprintf(lib->detail, sizeof lib->detail, "%.1024s", file);
    }
}

static void look_for(gpu_library *lib) {
    /* NULL: the dynamic loader's own search (LD_LIBRARY_PATH, the system's folders) */
    const char *folders[3] = {getenv("SLIDEPIPE_CUDA_LIBS"), NULL, "/usr/local/cuda/lib64"};
    char path[1024], last_error[512] = "not found";
    for (int pass = 0; pass < 3 && lib->handle == NULL; pass++) {
        if (pass == 0 && (folders[0] == NULL || *folders[0] == '\0')) {
            continue;
        }
        for (int i = 0; lib->sonames[i] != NULL && lib->handle == NULL; i++) {
            if (folders[pass] != NULL) {
                snprintf(path, sizeof path, "%s/%s", folders[pass], lib->sonames[i]);
            } else {
                snprintf(path, sizeof path, "%s", lib->sonames[i]);
            }
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h == NULL) {
                const char *why = dlerror();
                snprintf(last_error, sizeof last_error, "%s", why ? why : "cannot load");
                continue;
            }
            if (dlsym(h, lib->probe) == NULL) {
                snprintf(last_error, sizeof last_error, "%.400s lacks %s", path, lib->probe);
                dlclose(h);
                continue;
            }
            lib->handle = h;
            describe_version(lib, path);
        }
    }
    if (lib->handle == NULL) {
        snprintf(lib->detail, sizeof lib->detail, "%s not found (%s)", lib->label, last_error);
    }
}

static void look_for_all(void) {
    for (size_t i = 0; i < sizeof LIBRARIES / sizeof LIBRARIES[0]; i++) {
        look_for(&LIBRARIES[i]);
    }
}

int sp_cuda_library_found(sp_cuda_library library, char *detail, size_t detail_len) {
    if ((unsigned)library >= sizeof LIBRARIES / sizeof LIBRARIES[0]) {
        if (detail != NULL && detail_len > 0) {
            snprintf(detail, detail_len, "unknown library");
        }
        return 0;
    }
    pthread_once(&LOOKED, look_for_all);
    const gpu_library *lib = &LIBRARIES[library];
    if (detail != NULL && detail_len > 0) {
        snprintf(detail, detail_len, "%s", lib->detail);
    }
    return lib->handle != NULL;
}

void *sp_cuda_library_symbol(sp_cuda_library library, const char *name) {
    if (!sp_cuda_library_found(library, NULL, 0)) {
        return NULL;
    }
    return dlsym(LIBRARIES[library].handle, name);
}

bool sp_cuda_library_symbols(sp_cuda_library library, const char *const *names, size_t n,
                             void **slots, char *why, size_t why_len) {
    char detail[300];
    if (!sp_cuda_library_found(library, detail, sizeof detail)) {
        snprintf(why, why_len, "%.190s", detail);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        slots[i] = sp_cuda_library_symbol(library, names[i]);
        if (slots[i] == NULL) {
            snprintf(why, why_len, "%s lacks %s", LIBRARIES[library].label, names[i]);
            return false;
        }
    }
    return true;
}
