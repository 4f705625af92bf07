#include "backend/cuda/staged_copier.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "backend/cuda/check.h"

namespace tessera::cuda {

StagedCopier::~StagedCopier() {
  for (int i = 0; i < kBuffers; ++i) {
    if (done_[i]) {
      cudaEventSynchronize(done_[i]);
      cudaEventDestroy(done_[i]);
    }
    if (buf_[i]) cudaFreeHost(buf_[i]);
  }
}

void StagedCopier::copy(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (!buf_[0]) {
    for (int i = 0; i < kBuffers; ++i) {
      TESSERA_CUDA_CHECK(cudaHostAlloc(&buf_[i], kChunk, cudaHostAllocDefault));
      TESSERA_CUDA_CHECK(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming));
    }
    pool_ = std::make_unique<ThreadPool>(int(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)));
  }
  for (size_t off = 0; off < bytes; off += kChunk) {
    size_t n = std::min(kChunk, bytes - off);
    int b = next_;
    next_ = (next_ + 1) % kBuffers;
    TESSERA_CUDA_CHECK(cudaEventSynchronize(done_[b]));  // its previous copy has finished
    char* stage = static_cast<char*>(buf_[b]);
    const char* from = static_cast<const char*>(src) + off;
    pool_->parallel_for(int64_t(n), 1 << 20,
                        [&](int64_t i0, int64_t i1) { std::memcpy(stage + i0, from + i0, size_t(i1 - i0)); });
    TESSERA_CUDA_CHECK(
        cudaMemcpyAsync(static_cast<char*>(dst) + off, stage, n, cudaMemcpyHostToDevice, stream));
    TESSERA_CUDA_CHECK(cudaEventRecord(done_[b], stream));
  }
}

}  // namespace tessera::cuda
