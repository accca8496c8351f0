/* mpi_device.h — which accelerator a rank of slidepipe-mpi uses when a node has several: the
 * rank's local rank (its index among the ranks on its node) modulo the usable CUDA devices, so
 * ranks on one node spread over its GPUs. The choice is handed to the library through
 * SLIDEPIPE_CUDA_DEVICE (see sp_cuda_default_device). */
#ifndef SP_MPI_DEVICE_H
#define SP_MPI_DEVICE_H

#include <mpi.h>

/* This rank's index among the ranks sharing its node (MPI_Comm_split_type, ordered by rank in
 * `comm`): what mpirun and srun call the local rank. Collective over `comm`. */
int spmpi_local_rank(MPI_Comm comm);

/* The device index this rank should use (local rank modulo sp_cuda_device_count), or -1 when
 * no GPU is usable; sets SLIDEPIPE_CUDA_DEVICE to it unless already set. Collective over `comm`. */
int spmpi_pick_device(MPI_Comm comm, int *local_rank, int *visible);

#endif
