// Kernels for asking whether a library's kernel waits for the kernel before it when launched as
// its programmatic dependent (Gemm's check of its cuBLASLt plans): a writer that lets its
// dependents start at once but writes only after a delay, and a comparison of two results.
#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void late_fill_kernel(uint32_t* p, size_t words, uint32_t value, unsigned delay_ns) {
  allow_next();
  const uint64_t start = global_ns();
  while (global_ns() - start < delay_ns) __nanosleep(500);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    p[i] = value;
}

__global__ void count_differences_kernel(const uint32_t* a, const uint32_t* b, size_t words, unsigned* out) {
  unsigned n = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    n += a[i] != b[i];
  n = __reduce_add_sync(0xffffffffu, n);
  if (threadIdx.x % 32 == 0 && n) atomicAdd(out, n);
}

}  // namespace

bool dependent_launches() { return dependent_launch_supported(); }

void late_fill(void* p, size_t bytes, uint32_t value, unsigned delay_us, cudaStream_t s) {
  late_fill_kernel<<<128, 256, 0, s>>>(static_cast<uint32_t*>(p), bytes / 4, value, delay_us * 1000u);
  check_launch("late_fill");
}

void count_differences(const void* a, const void* b, size_t words, unsigned* out, cudaStream_t s) {
  count_differences_kernel<<<256, 256, 0, s>>>(static_cast<const uint32_t*>(a), static_cast<const uint32_t*>(b), words,
                                               out);
  check_launch("count_differences");
}

}  // namespace tessera::cuda
