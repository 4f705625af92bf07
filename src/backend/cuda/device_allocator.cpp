#include "backend/cuda/device_allocator.h"

#include "backend/cuda/check.h"

namespace tessera::cuda {

DeviceAllocator::~DeviceAllocator() { free_all(); }

size_t DeviceAllocator::round_size(size_t bytes) {
  // Small blocks in 512-byte steps, large ones in 2 MiB steps: a step's shapes repeat, so
  // requests fall back into the same classes.
  const size_t small = 512, large = size_t(2) << 20;
  bytes = bytes ? bytes : 1;
  return bytes <= (size_t(1) << 20) ? (bytes + small - 1) / small * small : (bytes + large - 1) / large * large;
}

void* DeviceAllocator::allocate(size_t bytes) {
  {
    std::lock_guard lock(mu_);
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_ -= bytes;
      in_use_ += bytes;
      return p;
    }
  }
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error before retrying
    trim();
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess)
      throw Error("CUDA: out of device memory allocating " + std::to_string(bytes) + " bytes (" +
                  std::to_string(in_use_ >> 20) + " MiB in use): " + cudaGetErrorString(e));
  }
  std::lock_guard lock(mu_);
  in_use_ += bytes;
  return p;
}

void DeviceAllocator::release(void* p, size_t bytes) {
  std::lock_guard lock(mu_);
  free_[bytes].push_back(p);
  in_use_ -= bytes;
  cached_ += bytes;
}

void DeviceAllocator::trim() {
  if (!keep_blocks_) free_all();
}

void DeviceAllocator::free_all() {
  std::lock_guard lock(mu_);
  for (auto& [size, blocks] : free_)
    for (void* p : blocks) cudaFree(p);
  free_.clear();
  cached_ = 0;
}

}  // namespace tessera::cuda
