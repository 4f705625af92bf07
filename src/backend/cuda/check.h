// Error checks for CUDA runtime and cuBLASLt calls: a failure becomes a tessera::Error naming the call.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>

#include "core/error.h"

namespace tessera::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}
inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLASLt: ") + what + ": status " + std::to_string(int(s)));
}
// After a kernel launch: reports bad launch configurations at once (execution errors surface at
// the next synchronising call).
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace tessera::cuda

#define TESSERA_CUDA_CHECK(call) ::tessera::cuda::check((call), #call)
