/* mpi_device.c — choosing a GPU per rank from its local rank (see mpi_device.h). */
#include "mpi_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int env_int(const char *name) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') {
        return -1;
    }
    char *end;
    long n = strtol(v, &end, 10);
    return *end == '\0' && n >= 0 && n < 1 << 20 ? (int)n : -1;
}

int spmpi_local_rank(MPI_Comm comm) {
    /* Always split, so the call stays collective whichever way this rank decides. */
    MPI_Comm node;
    int shared_rank = 0;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &shared_rank);
        MPI_Comm_free(&node);
    }
    static const char *const names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                        "MPI_LOCALRANKID"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int v = env_int(names[i]);
        if (v >= 0) {
            return v;
        }
    }
    return shared_rank;
}

int spmpi_visible_gpus(void) {
    const char *list = getenv("CUDA_VISIBLE_DEVICES");
    if (list != NULL) {
        if (*list == '\0' || strcmp(list, "-1") == 0 || strcmp(list, "NoDevFiles") == 0) {
            return 0;
        }
        int n = 1;
        for (const char *p = list; *p; p++) {
            n += *p == ',';
        }
        return n;
    }
    int n = 0;
    for (int i = 0; i < 64; i++) {
        char path[32];
        snprintf(path, sizeof path, "/dev/nvidia%d", i);
        if (access(path, F_OK) == 0) {
            n++;
        }
    }
    return n;
}

int spmpi_pick_device(MPI_Comm comm, int *local_rank, int *visible) {
    *local_rank = spmpi_local_rank(comm);
    *visible = spmpi_visible_gpus();
    return *visible > 0 ? *local_rank % *visible : -1;
}
