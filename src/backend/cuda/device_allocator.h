// Device memory for one backend: cudaMalloc'd blocks kept in per-size free lists, so that the
// activations a model step allocates and drops are reused without cudaMalloc/cudaFree (which
// synchronise the device). Blocks are whole cudaMalloc allocations (256-byte aligned, as
// cuBLASLt prefers). All work runs on one stream, so a block freed by the host can be handed
// out again at once: every later use is queued behind the earlier ones.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace tessera::cuda {

class DeviceAllocator {
 public:
  // keep_blocks: never free a block before destruction, even to retry a failed allocation (the
  // pool of recordings, whose replays write into their blocks whenever they run).
  explicit DeviceAllocator(bool keep_blocks = false) : keep_blocks_(keep_blocks) {}
  ~DeviceAllocator();
  // Rounded-up size class of a request; release() must be given the same rounded size.
  static size_t round_size(size_t bytes);
  void* allocate(size_t bytes);  // bytes already rounded
  void release(void* p, size_t bytes);
  // Frees every cached block (and retries allocation after a cudaMalloc failure); nothing when
  // keep_blocks.
  void trim();
  size_t bytes_in_use() const { return in_use_; }
  size_t bytes_cached() const { return cached_; }

 private:
  void free_all();

  const bool keep_blocks_;
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t in_use_ = 0, cached_ = 0;
};

}  // namespace tessera::cuda
