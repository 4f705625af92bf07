#include "backend/cuda_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace tessera {
namespace {

using CreateFn = Backend* (*)(int, int, char*, unsigned long);

std::vector<std::string> plugin_candidates() {
  std::vector<std::string> c;
  if (const char* env = std::getenv("TESSERA_CUDA_PLUGIN"); env && *env) return {env};
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) c.push_back((exe.parent_path() / "libtessera_cuda.so").string());
#ifdef TESSERA_CUDA_PLUGIN_PATH
  c.push_back(TESSERA_CUDA_PLUGIN_PATH);
#endif
  c.push_back("libtessera_cuda.so");
  return c;
}

}  // namespace

std::unique_ptr<Backend> load_cuda_backend(int device, std::string* error) {
  std::string why;
  void* lib = nullptr;
  for (const std::string& path : plugin_candidates()) {
    // A path that does not exist says nothing; a library that exists but fails to load (a
    // missing libcublasLt, say) is the reason worth reporting.
    bool named_file = path.find('/') != std::string::npos;
    if (named_file && !std::filesystem::exists(path)) {
      if (why.empty()) why = path + ": not found";
      continue;
    }
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    const char* e = dlerror();
    why = e ? e : path + ": cannot be loaded";
  }
  auto fail = [&](const std::string& msg) -> std::unique_ptr<Backend> {
    if (error) *error = "CUDA backend not available: " + msg;
    return nullptr;
  };
  if (!lib) return fail(why);
  // The library stays loaded for the life of the process: backends and tensors run its code.
  auto create = reinterpret_cast<CreateFn>(dlsym(lib, TESSERA_CUDA_PLUGIN_ENTRY));
  if (!create) return fail(std::string("no entry point ") + TESSERA_CUDA_PLUGIN_ENTRY + " in the plugin");
  char msg[1024] = {};
  Backend* be = create(TESSERA_CUDA_PLUGIN_ABI, device, msg, sizeof(msg));
  if (!be) return fail(msg);
  return std::unique_ptr<Backend>(be);
}

}  // namespace tessera
