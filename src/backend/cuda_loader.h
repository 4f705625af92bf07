// Loads the CUDA backend plugin (libtessera_cuda.so) at run time, so that the core binary does
// not depend on the CUDA libraries and runs where they are absent.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace tessera {

// The CUDA backend on `device`, or null with *error set ("CUDA backend not available: ...")
// when the plugin or its libraries cannot be loaded, or no such GPU is usable.
// The plugin is looked for at $TESSERA_CUDA_PLUGIN, beside the running executable, where the
// build put it, and on the library search path, in that order.
std::unique_ptr<Backend> load_cuda_backend(int device, std::string* error);

}  // namespace tessera
