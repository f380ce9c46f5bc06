// The part of cooperative_groups that dev/cuda's kernels use, for the CPU emulator (cuda_runtime.h): the thread
// block and the thread block cluster (sync, block_rank, num_blocks, map_shared_rank).
#pragma once
#include "cuda_runtime.h"
namespace cooperative_groups {
struct thread_block {
    void sync() const { __syncthreads(); }
    unsigned thread_rank() const { return threadIdx.x; }
    unsigned size() const { return blockDim.x; }
};
inline thread_block this_thread_block() { return {}; }
struct cluster_group {
    __attribute__((noinline)) void sync() const {  // every thread of every CTA of the cluster
        if (threadIdx.x == 0) emu::site(1);
        emu::wait(emu::AT_CLUSTER);
    }
    unsigned block_rank() const { return (unsigned)emu::cta(); }
    unsigned num_blocks() const { return (unsigned)emu::S().csize; }
    unsigned thread_rank() const { return block_rank() * blockDim.x + threadIdx.x; }
    template <class T> T* map_shared_rank(T* p, unsigned r) const { return (T*)emu::map_shared(p, r); }
};
inline cluster_group this_cluster() { return {}; }
} // namespace cooperative_groups
