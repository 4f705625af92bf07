// Host-to-device copies of large pageable sources (the mmapped checkpoint) through two pinned
// buffers: while the GPU copies one buffer, host threads fill the other from the source (several
// threads, so the page faults on the mapping proceed in parallel); an event per buffer says when
// it may be refilled. Copies are queued on the given stream and not waited for.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "core/threadpool.h"

namespace tessera::cuda {

class StagedCopier {
 public:
  static constexpr size_t kChunk = size_t(64) << 20;
  static constexpr int kBuffers = 2;
  // Below this the driver's own staging of pageable memory is as fast (norm weights, biases).
  static constexpr size_t kMinBytes = size_t(1) << 20;

  StagedCopier() = default;
  StagedCopier(const StagedCopier&) = delete;
  StagedCopier& operator=(const StagedCopier&) = delete;
  ~StagedCopier();

  // Returns once src has been read; the device copy completes in stream order.
  void copy(void* dst, const void* src, size_t bytes, cudaStream_t stream);

 private:
  void* buf_[kBuffers] = {};
  cudaEvent_t done_[kBuffers] = {};
  int next_ = 0;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace tessera::cuda
