/* cmd_gpu.c — `slidepipe gpu [--json]`: what the GPU backend can use on this machine: whether
 * the build has it, the CUDA devices (name, compute capability, memory), the device this process
 * would pick (SLIDEPIPE_CUDA_DEVICE or the MPI/Slurm local rank), and whether the run-time
 * libraries nvJPEG, cuFile, cuFFT and nvJPEG2000 were found. Always exits 0 when it could answer:
 * having no GPU is an answer, not an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char USAGE[] = "slidepipe gpu [--json]";

int cmd_gpu(int argc, char **argv) {
    bool json;
    int rc = cli_parse_json_only(argc, argv, USAGE, 0, NULL, &json);
    if (rc != CLI_OK) {
        return rc < 0 ? CLI_OK : rc;
    }
    char why[300];
    int n = sp_cuda_device_count(why, sizeof why);
    static const char *const LIB_NAMES[] = {"nvjpeg", "cufile", "cufft", "nvjpeg2k"};
    enum { LIBS = sizeof LIB_NAMES / sizeof LIB_NAMES[0] };
    char detail[LIBS][1500];
    int found[LIBS];
    for (int i = 0; i < LIBS; i++) {
        found[i] = sp_cuda_library_found((sp_cuda_library)i, detail[i], sizeof detail[i]);
    }
    if (json) {
        printf("{\"devices\": [");
    } else if (n == 0) {
        printf("GPU: none (%s)\n", why);
    }
    for (int d = 0; d < n; d++) {
        char name[256] = "";
        int major = 0, minor = 0;
        uint64_t mem = 0;
        sp_cuda_device_info(d, name, sizeof name, &major, &minor, &mem);
        if (json) {
            printf("%s{\"index\": %d, \"name\": ", d ? ", " : "", d);
            cli_json_string(stdout, name);
            printf(", \"compute_capability\": \"%d.%d\", \"memory_bytes\": %llu}", major, minor,
                   (unsigned long long)mem);
        } else {
            printf("GPU %d: %s, compute capability %d.%d, %.1f GiB\n", d, name, major, minor,
                   (double)mem / (1 << 30));
        }
    }
    /* which decoder region reads into device memory use for JPEG tiles (docs/gpu.md) */
    const char *nv_env = getenv("SLIDEPIPE_NVJPEG");
    const char *jpeg_path =
        n == 0 ? "cpu (no GPU)"
        : nv_env != NULL && (strcmp(nv_env, "0") == 0 || strcmp(nv_env, "off") == 0)
            ? "cpu (SLIDEPIPE_NVJPEG=0)"
        : !found[0] ? "cpu (nvJPEG not found)"
        : nv_env != NULL && strcmp(nv_env, "default") == 0
            ? "nvjpeg (default back end, SLIDEPIPE_NVJPEG=default)"
            : "nvjpeg (hardware decoder where the GPU has one, else the default back end)";
    int chosen = sp_cuda_default_device();
    if (json) {
        printf("], \"default_device\": %d, \"reason\": ", chosen);
        cli_json_string(stdout, n == 0 ? why : "");
        for (int i = 0; i < LIBS; i++) {
            printf(", \"%s\": {\"found\": %s, \"detail\": ", LIB_NAMES[i],
                   found[i] ? "true" : "false");
            cli_json_string(stdout, detail[i]);
            printf("}");
        }
        printf(", \"jpeg_decode\": ");
        cli_json_string(stdout, jpeg_path);
        printf("}\n");
    } else {
        if (n > 0) {
            printf("default device: %d\n", chosen);
        }
        printf("nvJPEG: %s\ncuFile: %s\ncuFFT: %s\nnvJPEG2000: %s\n", detail[0], detail[1],
               detail[2], detail[3]);
        printf("JPEG tiles into GPU memory: %s\n", jpeg_path);
    }
    return CLI_OK;
}
