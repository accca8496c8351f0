/* mpi_device.c — choosing a GPU per rank from its local rank (see mpi_device.h): the local rank
 * from the launcher or from the ranks sharing memory, the device count from the CUDA backend. */
#include "mpi_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slidepipe.h"

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

int spmpi_pick_device(MPI_Comm comm, int *local_rank, int *visible) {
    *local_rank = spmpi_local_rank(comm);
    *visible = sp_cuda_device_count(NULL, 0);
    int device = *visible > 0 ? *local_rank % *visible : -1;
    /* Hand the choice to the library: sp_cuda_default_device() honours this variable, so every
     * GPU path of this rank uses the device picked here unless the user named one. */
    if (device >= 0 && getenv("SLIDEPIPE_CUDA_DEVICE") == NULL) {
        char text[16];
        snprintf(text, sizeof text, "%d", device);
        setenv("SLIDEPIPE_CUDA_DEVICE", text, 0);
    }
    return device;
}
