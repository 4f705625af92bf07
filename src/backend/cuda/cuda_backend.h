// The CUDA backend: every op of backend.h on one NVIDIA GPU, on one stream. Activations are f32
// in device memory; weights are uploaded once in their own dtype (f32, f16, bf16); KV caches may
// be f32 or bf16 (f16 caches: store_kv only). Built as the plugin libtessera_cuda.so, which
// the core loads with dlopen (backend/cuda_loader.h), so that the engine runs without CUDA.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace tessera {

// Throws tessera::Error when no such device is usable.
std::unique_ptr<Backend> make_cuda_backend(int device);

}  // namespace tessera

// The plugin's C entry point. Returns a backend made with `new` (the caller owns it), or null
// with a message in error[0, error_size). `abi` must be TESSERA_CUDA_PLUGIN_ABI: the plugin and
// the core must be built from the same Backend and Tensor definitions (raise it whenever Backend's
// virtual functions or Tensor's layout change, so a stale plugin is refused instead of called).
#define TESSERA_CUDA_PLUGIN_ABI 7
#define TESSERA_CUDA_PLUGIN_ENTRY "tessera_cuda_create_backend"
extern "C" tessera::Backend* tessera_cuda_create_backend(int abi, int device, char* error, unsigned long error_size);
