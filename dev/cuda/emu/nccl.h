// The part of NCCL that train_miras.cu uses (its data-parallel section, make train_miras_cu USE_MPI=1), for the CPU
// emulator: the emulator's device memory is host memory, so each collective is the MPI collective of the same
// meaning on the same buffer (ncclAllReduce -> MPI_Allreduce, ncclBroadcast -> MPI_Bcast), on MPI_COMM_WORLD in
// the order the ranks call them. It checks train_miras.cu's data-parallel logic (which buffer is reduced, the
// scale, the ZeRO-1 shares and their broadcast, checkpoints and resume) under mpirun without a GPU; it says nothing
// about NCCL itself (its transports, streams, group semantics beyond "in order"). dev/cuda/test_emu_nccl.sh runs it.
#pragma once
#include <mpi.h>
#include <cstring>

typedef enum { ncclSuccess = 0, ncclSystemError = 2, ncclInvalidArgument = 4 } ncclResult_t;
typedef enum { ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef struct { char internal[128]; } ncclUniqueId;
struct ncclComm { int rank, nranks; };
typedef ncclComm* ncclComm_t;

inline const char* ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "emulated NCCL error"; }
inline ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    memset(id, 0, sizeof *id);
    strcpy(id->internal, "emu");
    return ncclSuccess;
}
inline ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
    int world = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (strcmp(id.internal, "emu") != 0 || nranks != world || rank < 0 || rank >= nranks) return ncclInvalidArgument;
    *comm = new ncclComm{rank, nranks};
    return ncclSuccess;
}
inline ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                  ncclComm_t, const void* /* stream */) {
    if (type != ncclFloat || op != ncclSum || count > (size_t)2147483647) return ncclInvalidArgument;
    int e = MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return e == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}
inline ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                                  ncclComm_t comm, const void* /* stream */) {
    if (type != ncclFloat || count > (size_t)2147483647) return ncclInvalidArgument;
    if (comm->rank == root && send != recv) memmove(recv, send, count * sizeof(float));
    int e = MPI_Bcast(recv, (int)count, MPI_FLOAT, root, MPI_COMM_WORLD);
    return e == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}
inline ncclResult_t ncclGroupStart() { return ncclSuccess; }  // the calls inside run one by one, in order
inline ncclResult_t ncclGroupEnd() { return ncclSuccess; }
