// Loads and stores of f32 / bf16 / f16 elements as f32, shared by the .cu files.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "backend/cuda/kernels.h"

namespace tessera::cuda {

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }

// Two 16-bit values as f32 and back (to nearest even); the pair type picks the format.
__device__ __forceinline__ float2 to_f32x2(__nv_bfloat162 v) { return __bfloat1622float2(v); }
__device__ __forceinline__ float2 to_f32x2(__half2 v) { return __half22float2(v); }
__device__ __forceinline__ void from_f32x2(float a, float b, __nv_bfloat162* out) { *out = __floats2bfloat162_rn(a, b); }
__device__ __forceinline__ void from_f32x2(float a, float b, __half2* out) { *out = __floats2half2_rn(a, b); }
// The pair type of a 16-bit element type.
template <class T>
struct Pair;
template <>
struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
};
template <>
struct Pair<__half> {
  using type = __half2;
};

// 8 consecutive 16-bit values (one 16-byte load) widened to f32; the pointer type picks the format.
template <class T>
__device__ __forceinline__ void unpack8(const uint4& raw, const T*, float* f) {
  const auto* h = reinterpret_cast<const typename Pair<T>::type*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 v = to_f32x2(h[i]);
    f[2 * i] = v.x, f[2 * i + 1] = v.y;
  }
}
// f[0..8) = p[0..8) as f32, through the read-only cache; p is 16-byte aligned.
__device__ __forceinline__ void load8(const float* p, float* f) {
  float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p + 4));
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
template <class T>
__device__ __forceinline__ void load8(const T* p, float* f) {
  unpack8(__ldg(reinterpret_cast<const uint4*>(p)), p, f);
}

// w[0..8) · (a, b): 8 weights times 8 f32 activations, summed in order.
__device__ __forceinline__ float dot8(const float* w, const float4& a, const float4& b) {
  return w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y + w[6] * b.z + w[7] * b.w;
}

// p[0..8) = f[0..8) rounded to p's format (to nearest even); p is 16-byte aligned.
__device__ __forceinline__ void store8(float* p, const float* f) {
  reinterpret_cast<float4*>(p)[0] = make_float4(f[0], f[1], f[2], f[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(f[4], f[5], f[6], f[7]);
}
template <class T>
__device__ __forceinline__ void store8(T* p, const float* f) {
  uint4 raw;
  auto* h = reinterpret_cast<typename Pair<T>::type*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) from_f32x2(f[2 * i], f[2 * i + 1], &h[i]);
  *reinterpret_cast<uint4*>(p) = raw;
}

// p[i] as f32, p of dtype dt (f32, bf16 or f16; the same for every thread): a few values of a
// weight read where a kernel of its own for each dtype would not pay (the per-head norms').
__device__ __forceinline__ float load_as(const void* p, DType dt, int64_t i) {
  if (dt == DType::BF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  if (dt == DType::F16) return __half2float(static_cast<const __half*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

// p[i] = v, and p[i], p[i + 1] = v0, v1 (i even), in p's dtype dt: an output kept in the 16-bit
// format of the product it feeds (the attention's), or f32. dt is the same for every thread.
__device__ __forceinline__ void store_as(void* p, DType dt, int64_t i, float v) {
  if (dt == DType::BF16) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  else if (dt == DType::F16) static_cast<__half*>(p)[i] = __float2half_rn(v);
  else static_cast<float*>(p)[i] = v;
}
__device__ __forceinline__ void store2_as(void* p, DType dt, int64_t i, float v0, float v1) {
  if (dt == DType::BF16) from_f32x2(v0, v1, reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(p) + i));
  else if (dt == DType::F16) from_f32x2(v0, v1, reinterpret_cast<__half2*>(static_cast<__half*>(p) + i));
  else *reinterpret_cast<float2*>(static_cast<float*>(p) + i) = make_float2(v0, v1);
}

// act(g) * u, the gated MLP's product (glu, and the gate/up GEMV that ends in it): silu, or with
// kGelu gelu's tanh form as g * sigmoid(2 z) (0.5 (1 + tanh(z)) = sigmoid(2 z)).
template <bool kGelu>
__device__ __forceinline__ float glu_times(float g, float u) {
  const float s = kGelu ? 1.5957691216057308f * (g + 0.044715f * g * g * g) : g;  // 2 sqrt(2 / pi) (...)
  return g / (1.0f + expf(-s)) * u;
}

// Programmatic dependent launch (Hopper; no-ops before). A kernel launched after its stream's
// previous kernel with the programmatic-serialization attribute may start while that kernel
// still runs: it must call wait_for_previous() before it reads or writes anything the previous
// kernels touch (weights it only reads may be fetched before). allow_next() lets such a
// successor start now rather than when this kernel's blocks exit.
__device__ __forceinline__ void wait_for_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_next() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Starts moving the 128-byte line at p into L2 (no register waits on it).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Whether p may be read or written 16 bytes at a time (the vector kernels' precondition).
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The current device's compute capability (major, minor), read once; (0, 0) if none is usable.
inline std::pair<int, int> compute_capability() {
  static const std::pair<int, int> cc = [] {
    int dev = 0, major = 0, minor = 0;
    const bool ok = cudaGetDevice(&dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess;
    return ok ? std::pair{major, minor} : std::pair{0, 0};
  }();
  return cc;
}

// Whether the current device runs programmatic dependent launches (compute capability 9+).
inline bool dependent_launch_supported() { return compute_capability().first >= 9; }

// Whether machine code built for sm_90a (wgmma.cuh's kernels) runs on the current device:
// compute capability 9.0 only.
inline bool sm90a_runs() { return compute_capability() == std::pair{9, 0}; }

// kernel<<<grid, block, smem, s>>>(args...) as a programmatic dependent of the stream's previous
// kernel where the device supports it; the kernel calls wait_for_previous() before it touches
// memory that kernel may use. With a cluster shape other than 1x1x1 (compute capability 9+, the
// grid a multiple of it), the blocks run in thread-block clusters of that shape.
template <class... P, class... A>
void launch_in_clusters(void (*kernel)(P...), dim3 grid, dim3 cluster, dim3 block, size_t smem, cudaStream_t s,
                        A&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attrs[2]{};
  int n = 0;
  if (dependent_launch_supported()) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = cluster.x, attrs[n].val.clusterDim.y = cluster.y, attrs[n++].val.clusterDim.z = cluster.z;
  }
  cfg.attrs = attrs;
  cfg.numAttrs = unsigned(n);
  cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
}

template <class... P, class... A>
void launch_dependent(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A&&... args) {
  launch_in_clusters(kernel, grid, dim3(1, 1, 1), block, smem, s, std::forward<A>(args)...);
}

// Asynchronous copies into shared memory (sm_80+): 16 bytes global → shared, zero-filled when
// !valid; a thread's copies since its last commit form a group, and waiting for all but the N
// most recent groups makes the older ones visible to this thread (a barrier then to the block).
__device__ __forceinline__ unsigned smem_addr(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid = true) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Row n of a stacked group (rows numbered across its parts): its part's weights and output, the
// part's first row and width. Constant indices into the parameter arrays only: a computed index
// would copy them to local memory.
struct PartRow {
  const void* w;
  void* out;
  int64_t first, width;
};
__device__ __forceinline__ PartRow part_row(const StackedParts& g, int64_t n) {
  PartRow r{g.w[0], g.out[0], 0, g.rows_end[0]};
#pragma unroll
  for (int p = 1; p < StackedParts::kMaxParts; ++p)
    if (p < g.count && n >= g.rows_end[p - 1]) r = {g.w[p], g.out[p], g.rows_end[p - 1], g.rows_end[p] - g.rows_end[p - 1]};
  return r;
}

// Sum over a warp in a fixed order (a butterfly); every lane gets the same total.
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace tessera::cuda
