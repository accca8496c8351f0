/* mpi_device.c — choosing a GPU per rank from its local rank (see mpi_device.h): the local rank
 * among the ranks sharing the node, the device count from the CUDA backend. */
#include "mpi_device.h"

#include <stdio.h>
#include <stdlib.h>

#include "slidepipe.h"

int spmpi_local_rank(MPI_Comm comm) {
    MPI_Comm node;
    int local = 0;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
    }
    return local;
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
