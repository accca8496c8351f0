/* mpi_device.h — which accelerator a rank of slidepipe-mpi uses when a node has several: the
 * rank's local rank (its index among the ranks on its node) modulo the visible GPUs, so ranks on
 * one node spread over its GPUs. The CPU runner only records the choice; the CUDA backend will
 * pass it to cudaSetDevice. */
#ifndef SP_MPI_DEVICE_H
#define SP_MPI_DEVICE_H

#include <mpi.h>

/* The local rank from the launcher's environment (OMPI_COMM_WORLD_LOCAL_RANK for Open MPI's
 * mpirun, SLURM_LOCALID for srun, MPI_LOCALRANKID for MPICH), else computed from the ranks
 * sharing memory (MPI_Comm_split_type). Collective over `comm`: every rank calls it. */
int spmpi_local_rank(MPI_Comm comm);

/* GPUs visible to this process: the entries of CUDA_VISIBLE_DEVICES when it is set, else the
 * /dev/nvidiaN device nodes; 0 when none. */
int spmpi_visible_gpus(void);

/* The device index this rank should use (local rank modulo the visible GPUs), or -1 when no GPU
 * is visible. Collective over `comm`. */
int spmpi_pick_device(MPI_Comm comm, int *local_rank, int *visible);

#endif
