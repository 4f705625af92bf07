// CudaBackend: device memory through the caching allocator, matrix products through cuBLASLt,
// everything else through the kernels of elementwise.cu and attention.cu.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "backend/cuda/check.h"
#include "backend/cuda/device_allocator.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/operands.h"
#include "backend/cuda/staged_copier.h"
#include "core/quantization.h"

namespace tessera {
namespace {

using cuda::DeviceAllocator;
using cuda::follows;
using cuda::follows_quantized;
using cuda::ptr;
using cuda::quantized_matrix;
using cuda::require_device;
using cuda::require_f32;
using cuda::require_float;
using cuda::require_i32;
using cuda::rope_store_args;
using cuda::same_quantization;
using cuda::StagedCopier;

// A CUDA graph instantiated from a stream capture.
class CudaRecording final : public Recording {
 public:
  explicit CudaRecording(cudaGraphExec_t exec) : exec_(exec) {}
  ~CudaRecording() override { cudaGraphExecDestroy(exec_); }
  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaGraphExec_t exec_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) throw Error(std::string("no usable CUDA device: ") + cudaGetErrorString(e));
    TESSERA_CHECK(device >= 0 && device < count, "CUDA device " + std::to_string(device) + " not present (" +
                                                     std::to_string(count) + " found)");
    TESSERA_CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    TESSERA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    name_ = "cuda:" + std::to_string(device) + " (" + prop.name + ")";
    sm_count_ = prop.multiProcessorCount;
    smem_optin_ = prop.sharedMemPerBlockOptin;
    TESSERA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TESSERA_CUDA_CHECK(cudaEventCreateWithFlags(&downloaded_, cudaEventDisableTiming));
    alloc_ = std::make_shared<DeviceAllocator>();
    recording_alloc_ = std::make_shared<DeviceAllocator>(/*keep_blocks=*/true);
    gemm_ = std::make_unique<cuda::Gemm>(stream_);
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    gemm_.reset();
    cudaEventDestroy(downloaded_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return name_; }
  Device device() const override { return Device::CUDA; }

  Tensor empty(DType dtype, Shape shape) override {
    size_t bytes = DeviceAllocator::round_size(size_t(std::max<int64_t>(1, shape_numel(shape))) * dtype_size(dtype));
    auto alloc = recording_ ? recording_alloc_ : alloc_;
    void* p = alloc->allocate(bytes);
    std::shared_ptr<void> owner(p, [alloc, bytes](void* q) { alloc->release(q, bytes); });
    return Tensor::view(p, dtype, std::move(shape), std::move(owner), Device::CUDA);
  }

  // Returns once the source has been read (it may then be freed or unmapped); the device copy
  // completes in stream order.
  Tensor upload(const Tensor& host) override {
    if (host.device() == Device::CUDA) return host;
    if (const Quantization* q = host.quantization()) {
      Tensor codes = empty(DType::U32, {int64_t(host.nbytes() / 4)});
      copy_from_host(codes.raw(), host);
      return Tensor::quantized(codes, host.shape(),
                               {q->bits, q->group_size, upload(q->scales), upload(q->biases)});
    }
    Tensor t = empty(host.dtype(), host.shape());
    copy_from_host(t.raw(), host);
    return t;
  }

  std::vector<Tensor> upload_group(const std::vector<Tensor>& hosts) override {
    if (hosts.empty()) return {};
    const Tensor& first = hosts.front();
    if (first.quantization()) return upload_quantized_group(hosts);
    int64_t rows = 0;
    bool stackable = true;
    for (const Tensor& h : hosts) {
      stackable = stackable && h.device() == Device::CPU && h.ndim() == 2 && h.dtype() == first.dtype() &&
                  h.dim(1) == first.dim(1);
      rows += h.dim(0);
    }
    std::vector<Tensor> out;
    if (!stackable) {
      for (const Tensor& h : hosts) out.push_back(upload(h));
      return out;
    }
    Tensor all = empty(first.dtype(), {rows, first.dim(1)});
    int64_t row = 0;
    for (const Tensor& h : hosts) {
      out.push_back(all.slice_rows(row, row + h.dim(0)));
      row += h.dim(0);
      copy_from_host(out.back().raw(), h);
    }
    return out;
  }

  // Beyond the GEMV's few tokens every product rounds its input to the weights' 16 bits, so
  // inputs kept in that format save the conversion and half the activation traffic.
  DType linear_input_dtype(DType weight_dtype, int64_t tokens) const override {
    const bool half = weight_dtype == DType::BF16 || weight_dtype == DType::F16;
    return half && tokens > cuda::kGemvMaxTokens ? weight_dtype : DType::F32;
  }

  // Quantized weights stay codes: the products of up to 64 tokens read them once (qmma, or qgemv
  // where it does not apply), those of more tokens widen them to their scales' dtype first
  // (quantized_linear_group).
  bool holds_quantized() const override { return true; }

  MemoryInfo memory_info() override {
    size_t free = 0, total = 0;
    TESSERA_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return {total, free};
  }

  void download(const Tensor& src, void* dst) override {
    require_device(src, "download", "source");
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, src.raw(), src.nbytes(), cudaMemcpyDeviceToHost, stream_));
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void download_async(const Tensor& src, void* dst) override {
    require_device(src, "download_async", "source");
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, src.raw(), src.nbytes(), cudaMemcpyDeviceToHost, stream_));
    TESSERA_CUDA_CHECK(cudaEventRecord(downloaded_, stream_));
  }

  void wait_downloads() override { TESSERA_CUDA_CHECK(cudaEventSynchronize(downloaded_)); }

  void copy(const Tensor& src, Tensor& dst) override {
    require_device(src, "copy", "source");
    require_device(dst, "copy", "destination");
    TESSERA_CHECK(dst.nbytes() == src.nbytes(), "copy: " + std::to_string(src.nbytes()) + " bytes into a tensor of " +
                                                    std::to_string(dst.nbytes()));
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, stream_));
  }

  void upload_to(const Tensor& host, Tensor& dst) override {
    require_device(dst, "upload_to", "destination");
    TESSERA_CHECK(dst.nbytes() == host.nbytes(), "upload_to: " + std::to_string(host.nbytes()) +
                                                     " bytes into a tensor of " + std::to_string(dst.nbytes()));
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, stream_));
  }

  // Stream capture: the ops' launches become a graph's nodes (a kernel launched as a dependent
  // keeps its early start as a programmatic edge). Their allocations come from the recording
  // pool, whose blocks are never freed, so the graph's addresses stay valid; recordings share
  // the pool as they never run at once (one stream).
  bool can_record() const override { return true; }
  std::unique_ptr<Recording> record(const std::function<void()>& ops) override {
    TESSERA_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    recording_ = true;
    cudaGraph_t graph = nullptr;
    try {
      ops();
    } catch (...) {
      recording_ = false;
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      throw;
    }
    recording_ = false;
    TESSERA_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    TESSERA_CUDA_CHECK(e);
    return std::make_unique<CudaRecording>(exec);
  }
  void replay(const Recording& r) override {
    TESSERA_CUDA_CHECK(cudaGraphLaunch(static_cast<const CudaRecording&>(r).exec(), stream_));
  }

  Tensor host_empty(DType dtype, Shape shape) override {
    void* p = nullptr;
    TESSERA_CUDA_CHECK(cudaMallocHost(&p, size_t(std::max<int64_t>(1, shape_numel(shape))) * dtype_size(dtype)));
    std::shared_ptr<void> owner(p, [](void* q) { cudaFreeHost(q); });
    return Tensor::view(p, dtype, std::move(shape), std::move(owner), Device::CPU);
  }

  void embedding(const Tensor& table, const Tensor& ids, float scale, Tensor& out) override {
    require_device(table, "embedding", "table");
    require_i32(ids, "embedding", "ids");
    require_f32(out, "embedding", "out");
    if (table.quantization()) {
      TESSERA_CHECK(table.ndim() == 2 && out.numel() == ids.numel() * table.dim(1),
                    "embedding: table " + shape_str(table.shape()) + ", " + std::to_string(ids.numel()) +
                        " ids, out " + shape_str(out.shape()));
      cuda::widen(quantized_matrix(table), ptr<int32_t>(ids), 0, ids.numel(), table.dim(1), scale, out.raw(),
                  DType::F32, stream_);
      return;
    }
    cuda::embedding(table.raw(), table.dtype(), ptr<int32_t>(ids), ids.numel(), table.dim(1), table.dim(0), scale,
                    ptr(out), stream_);
  }

  void rms_norm(const Tensor& x, const Tensor& w, float eps, float offset, Tensor& out) override {
    require_f32(x, "rms_norm", "x");
    require_device(w, "rms_norm", "weight");
    require_float(out, "rms_norm", "out");
    int64_t D = x.dim(-1);
    TESSERA_CHECK(w.numel() == D, "rms_norm: weight of " + std::to_string(w.numel()) + " for rows of " +
                                      std::to_string(D));
    cuda::rms_norm(ptr(x), w.raw(), w.dtype(), eps, offset, x.numel() / D, D, out.raw(), out.dtype(), stream_);
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) override {
    linear_group(x, {{w, bias, out}});
  }

  // x and the outputs are f32 or the weights' dtype (one dtype for all outputs of a group).
  void linear_group(const Tensor& x, std::initializer_list<LinearPart> parts) override {
    linear_parts(x, {parts.begin(), parts.size()});
  }
  // With a form other than the plain one (cuda::GemvForm), only the GEMV runs: false where it
  // does not apply (nothing done).
  bool linear_parts(const Tensor& x, std::span<const LinearPart> parts, cuda::GemvForm form = {}) {
    const bool plain = form.kind == cuda::GemvForm::Plain;
    TESSERA_CHECK(parts.size() > 0, "linear: an empty group");
    if (parts.front().weight.quantization()) {
      if (!plain) return false;
      quantized_linear_group(x, parts);
      return true;
    }
    const int64_t K = x.dim(-1), T = x.numel() / K;
    const DType dt = parts.begin()->weight.dtype(), out_dt = parts.begin()->out.dtype();
    require_device(x, "linear", "input");
    TESSERA_CHECK(x.dtype() == DType::F32 || x.dtype() == dt, "linear: input of " +
                                                                  std::string(dtype_name(x.dtype())) + " for " +
                                                                  std::string(dtype_name(dt)) + " weights");
    cuda::StackedParts g;
    bool stacked = parts.size() > 1;  // the parts are consecutive rows of one matrix
    const char* next_row = nullptr;
    int64_t narrowest = INT64_MAX;
    for (const LinearPart& p : parts) {
      narrowest = std::min(narrowest, p.weight.dim(0));
      if (next_row) stacked = stacked && p.weight.raw() == next_row;
      next_row = static_cast<const char*>(p.weight.raw()) + p.weight.nbytes();
      require_device(p.weight, "linear", "weight");
      require_device(p.out, "linear", "out");
      TESSERA_CHECK(p.out.dtype() == out_dt && (out_dt == DType::F32 || out_dt == dt),
                    "linear: output of " + std::string(dtype_name(p.out.dtype())) + " for " +
                        std::string(dtype_name(dt)) + " weights");
      TESSERA_CHECK(p.weight.dim(1) == K, "linear: weight " + shape_str(p.weight.shape()) + " vs input " +
                                              shape_str(x.shape()));
      TESSERA_CHECK(p.weight.dtype() == dt, "linear: the weights of a group differ in dtype");
      if (g.count < cuda::StackedParts::kMaxParts) {
        g.w[g.count] = p.weight.raw(), g.out[g.count] = p.out.raw();
        g.rows_end[g.count] = (g.count ? g.rows_end[g.count - 1] : 0) + p.weight.dim(0);
      }
      ++g.count;
    }
    const bool gemv =
        x.dtype() == DType::F32 && out_dt == DType::F32 && cuda::gemv(ptr(x), g, dt, T, K, stream_, form);
    if (!gemv && !plain) return false;
    if (dt == DType::F32) {
      for (const LinearPart& p : parts) gemm_->run(x.raw(), p.weight.raw(), dt, p.out.raw(), out_dt, T, p.weight.dim(0), K);
    } else if (!gemv) {
      // 16-bit weights beyond the GEMV's few tokens: f32 activations go to the weight's format
      // once for the group, accumulation stays f32.
      Tensor x16 = x;
      if (x.dtype() == DType::F32) {
        x16 = empty(dt, {T, K});
        cuda::convert_f32(ptr(x), T * K, x16.raw(), dt, stream_);
      }
      if (g.count <= cuda::StackedParts::kMaxParts && cuda::skinny_gemm(x16.raw(), g, dt, out_dt, T, K, stream_)) {
        // Small decode batches on Hopper: the whole group in one launch, written to each part.
      } else if (stacked && narrowest < kNarrowRows && g.count <= cuda::StackedParts::kMaxParts && T <= kStackedMaxTokens) {
        // Decode batches: one product over the stacked matrix fills the GPU better than the
        // narrow parts' own (k/v); its columns are then scattered to the parts.
        const int64_t N = g.rows_end[g.count - 1];
        Tensor all = empty(out_dt, {T, N});
        gemm_->run(x16.raw(), g.w[0], dt, all.raw(), out_dt, T, N, K);
        cuda::split_columns(all.raw(), out_dt, T, g, stream_);
      } else {
        for (const LinearPart& p : parts)
          gemm_->run(x16.raw(), p.weight.raw(), dt, p.out.raw(), out_dt, T, p.weight.dim(0), K);
      }
    }
    for (const LinearPart& p : parts)
      if (p.bias.defined()) {
        require_device(p.bias, "linear", "bias");
        cuda::add_bias(p.out.raw(), out_dt, p.bias.raw(), p.bias.dtype(), T, p.weight.dim(0), stream_);
      }
    return true;
  }

  void rope(Tensor& x, const Tensor& positions, const RopeParams& p) override {
    require_f32(x, "rope", "x");
    require_i32(positions, "rope", "positions");
    require_f32(p.inv_freq, "rope", "inv_freq");
    TESSERA_CHECK(p.rotary_dim <= x.dim(2) && p.inv_freq.numel() >= p.rotary_dim / 2, "rope: rotary_dim too large");
    cuda::rope(ptr(x), ptr<int32_t>(positions), ptr(p.inv_freq), p.attention_scaling, x.dim(0), x.dim(1), x.dim(2),
               p.rotary_dim, stream_);
  }

  void store_kv(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& kc, Tensor& vc) override {
    require_f32(k, "store_kv", "k");
    require_f32(v, "store_kv", "v");
    require_i32(slots, "store_kv", "slots");
    require_device(kc, "store_kv", "k cache");
    require_device(vc, "store_kv", "v cache");
    TESSERA_CHECK(kc.dtype() == vc.dtype(), "store_kv: k and v caches differ in dtype");
    int64_t T = k.dim(0), row = T ? k.numel() / T : 0;
    TESSERA_CHECK(kc.numel() / kc.dim(0) == row, "store_kv: cache rows of " + shape_str(kc.shape()) +
                                                     " vs k " + shape_str(k.shape()));
    cuda::store_kv(ptr(k), ptr(v), ptr<int32_t>(slots), T, row, kc.dim(0), kc.raw(), vc.raw(), kc.dtype(), stream_);
  }

  void rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, const Tensor& positions, const RopeParams& p,
                     const Tensor& slots, Tensor& kc, Tensor& vc, const QkNorm* qk_norm) override {
    require_f32(q, "rope_store_kv", "q");
    require_f32(k, "rope_store_kv", "k");
    require_f32(v, "rope_store_kv", "v");
    const int64_t T = q.dim(0), H = q.dim(1), Dh = q.dim(2), Hkv = k.dim(1);
    TESSERA_CHECK(k.dim(0) == T && v.numel() == k.numel() && k.dim(2) == Dh,
                  "rope_store_kv: q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " +
                      shape_str(v.shape()));
    cuda::RopeStoreArgs a = rope_store_args(T, H, Hkv, Dh, positions, p, slots, kc, vc, qk_norm);
    a.q = ptr(q), a.k = ptr(k), a.v = ptr(v), a.ld_q = H * Dh, a.ld_kv = Hkv * Dh;
    a.q_out = ptr(q), a.k_out = ptr(k);
    cuda::rope_store_kv(a, stream_);
  }

  // Past the GEMV and the skinny product (which write each part themselves), with the parts
  // stacked (upload_group) and no biases: one product over the stacked rows, whose q, k and v
  // column ranges the rope kernel reads where they lie (no scatter into the parts).
  void linear_rope_store_kv(const Tensor& x, const LinearPart& q, const LinearPart& k, const LinearPart& v,
                            const Tensor& positions, const RopeParams& p, const Tensor& slots, Tensor& kc,
                            Tensor& vc, const QkNorm* qk_norm) override {
    const int64_t K = x.dim(-1), T = x.numel() / K, Dh = kc.dim(-1), Nq = q.weight.dim(0), Nkv = k.weight.dim(0);
    const DType dt = q.weight.dtype();
    const bool fused = T > cuda::kSkinnyMaxTokens && (dt == DType::BF16 || dt == DType::F16) &&
                       q.weight.ndim() == 2 && follows(k.weight, q.weight) && follows(v.weight, k.weight) &&
                       v.weight.dim(0) == Nkv && Nq % Dh == 0 && Nkv % Dh == 0 && !q.bias.defined() &&
                       !k.bias.defined() && !v.bias.defined() && q.out.numel() == T * Nq;
    if (!fused) return Backend::linear_rope_store_kv(x, q, k, v, positions, p, slots, kc, vc, qk_norm);
    require_f32(q.out, "linear_rope_store_kv", "q out");
    const int64_t N = Nq + 2 * Nkv;
    Tensor stacked = Tensor::view(q.weight.raw(), dt, {N, q.weight.dim(1)}, q.weight.owner(), Device::CUDA);
    // Split over k ranges where that is faster (narrow_gemm, else Gemm::splits): the rope
    // kernel sums the parts.
    const bool direct = x.dtype() == dt && x.device() == Device::CUDA && stacked.dim(1) == K;
    const bool narrow = direct && cuda::narrow_gemm_applies(x.raw(), stacked.raw(), dt, T, K);
    const int splits = narrow   ? cuda::narrow_gemm_splits(T, N, K, dt)
                       : direct ? gemm_->splits(x.raw(), stacked.raw(), dt, T, N, K)
                                : 1;
    Tensor all = empty(DType::F32, {splits, T, N});
    if (narrow) cuda::narrow_gemm(x.raw(), stacked.raw(), dt, T, N, K, splits, ptr(all), stream_);
    else if (splits == 1) linear(x, stacked, Tensor(), all);
    else gemm_->run(x.raw(), stacked.raw(), dt, all.raw(), DType::F32, T, N, K, splits);
    cuda::RopeStoreArgs a = rope_store_args(T, Nq / Dh, Nkv / Dh, Dh, positions, p, slots, kc, vc, qk_norm);
    a.q = ptr(all), a.k = a.q + Nq, a.v = a.k + Nkv, a.ld_q = a.ld_kv = N;
    a.parts = splits, a.part_stride = T * N;
    a.q_out = ptr(q.out), a.k_out = nullptr;
    cuda::rope_store_kv(a, stream_);
  }

  void attention(const Tensor& q, const Tensor& kc, const Tensor& vc, const AttentionMeta& m,
                 const AttentionParams& p, Tensor& out) override {
    const cuda::AttentionArgs a = cuda::attention_args(q, kc, vc, m, p, out);
    // Decode steps of bf16 caches on the tensor cores: on small grids (under 64 sequence x kv head
    // blocks) with their key splits merged in a cluster where that form applies, else the
    // CUDA-core decode kernel; from 64 blocks by whole waves (flash_decode_splits). Then the
    // tensor-core prefill kernel, then the general one (any shape and dtype). Measured on the
    // H200 (8B shapes, contexts 512 and 4096): the tensor-core decode by waves is 1.3-1.45x
    // faster than the CUDA-core kernel from 64 blocks (batch 8) up; the cluster form 5-14%
    // faster at batch 1-4 (flash_decode_cluster_splits), and 3% slower at 128 blocks.
    const int64_t seq_blocks = int64_t(m.num_seqs) * a.Hkv;
    const bool tc = cuda::flash_decode_applies(a, m.max_query_len, smem_optin_);
    const int cluster_splits = tc && seq_blocks < kFlashDecodeMinBlocks ? cuda::flash_decode_cluster_splits(a) : 0;
    const bool flash_decode = tc && (seq_blocks >= kFlashDecodeMinBlocks || cluster_splits > 0);
    const bool decode = !flash_decode && cuda::decode_attention_applies(a, m.max_query_len);
    int q_tiles = decode || flash_decode ? 0 : cuda::flash_attention_tiles(a, m.max_query_len, smem_optin_);
    int64_t blocks = q_tiles > 0 ? seq_blocks * q_tiles : a.T * a.Hkv;
    // CUDA-core decode: up to 8 blocks per SM; small grids split into ranges of 64 keys, grids
    // that fill the GPU only long contexts (at 512 keys the merge costs more than the split gains).
    int splits = cluster_splits > 0 ? cluster_splits
                 : flash_decode     ? cuda::flash_decode_splits(a, sm_count_)
                 : decode           ? attention_splits(blocks, m.max_context_len, blocks < 2 * sm_count_ ? 64 : 512, 8)
                                    : attention_splits(blocks, m.max_context_len, 128, 2);
    if (decode) splits = cuda::decode_attention_splits(a, splits, sm_count_);  // 9-16 of them may become 8
    const bool clustered = cluster_splits > 1;  // its splits merge in the cluster, with no partial results
    Tensor partial;
    if (splits > 1 && !clustered) partial = empty(DType::F32, {a.T * a.H * splits * (a.Dh + 2)});
    float* part = partial.defined() ? ptr(partial) : nullptr;
    if (flash_decode) cuda::flash_decode(a, splits, clustered, part, sm_count_, stream_);
    else if (decode) cuda::decode_attention(a, splits, part, sm_count_, stream_);
    else if (q_tiles > 0) cuda::flash_attention(a, q_tiles, splits, part, stream_);
    else cuda::attention(a, splits, part, stream_);
  }

  void glu(Glu act, const Tensor& gate, const Tensor& up, Tensor& out) override {
    require_float(gate, "glu", "gate");
    require_float(up, "glu", "up");
    require_float(out, "glu", "out");
    TESSERA_CHECK(gate.dtype() == up.dtype() && up.numel() == gate.numel() && out.numel() == gate.numel(),
                  "glu: gate " + shape_str(gate.shape()) + " " + std::string(dtype_name(gate.dtype())) + ", up " +
                      shape_str(up.shape()) + " " + std::string(dtype_name(up.dtype())) + ", out " +
                      shape_str(out.shape()));
    cuda::glu(act, gate.raw(), up.raw(), gate.dtype(), out.raw(), out.dtype(), gate.numel(), stream_);
  }

  void softcap(Tensor& x, float cap) override {
    require_f32(x, "softcap", "x");
    cuda::softcap(ptr(x), x.numel(), cap, stream_);
  }

  // cuda::gemv_glu where it applies (x normalised first where the form is Normed); false where not.
  bool gemv_glu(Glu act, const Tensor& x, const LinearPart& gate, const LinearPart& up, Tensor& out,
                cuda::GemvForm form = {}) {
    const int64_t K = x.dim(-1), T = x.numel() / K, F = gate.weight.dim(0);
    const DType dt = gate.weight.dtype();
    auto fits = [&](const Tensor& bias) { return !bias.defined() || (bias.dtype() == dt && bias.numel() == F); };
    if (gate.weight.quantization() || x.dtype() != DType::F32 || out.dtype() != DType::F32 ||
        up.weight.dtype() != dt || gate.weight.shape() != Shape{F, K} || up.weight.shape() != Shape{F, K} ||
        out.numel() != T * F || !fits(gate.bias) || !fits(up.bias))
      return false;
    require_device(x, "linear_glu", "input");
    require_device(out, "linear_glu", "out");
    for (const LinearPart* p : {&gate, &up}) {
      require_device(p->weight, "linear_glu", "weight");
      if (p->bias.defined()) require_device(p->bias, "linear_glu", "bias");
    }
    const cuda::GatedPair g{gate.weight.raw(), up.weight.raw(),
                            gate.bias.defined() ? gate.bias.raw() : nullptr,
                            up.bias.defined() ? up.bias.raw() : nullptr, F};
    return cuda::gemv_glu(act, ptr(x), g, dt, T, K, ptr(out), stream_, form);
  }

  // Decode batches (f32 x and out, 16-bit weights, biases of their dtype or none): one GEMV whose
  // warps each read a row of gate and of up and write only act(gate) * up, so the intermediates
  // and the glu launch are gone. Elsewhere the default: the group's products, then glu.
  void linear_glu(Glu act, const Tensor& x, const LinearPart& gate, const LinearPart& up,
                  Tensor& out) override {
    const int64_t K = x.dim(-1), T = x.numel() / K, F = gate.weight.dim(0);
    const DType dt = gate.weight.dtype();
    if (gemv_glu(act, x, gate, up, out)) return;
    // Decode batches past the skinny product, with gate and up stacked (upload_group), no biases:
    // on Hopper up to 64 tokens, narrow_gemm's MLP form (act(gate) * up in the product); else
    // one product over the stacked rows, whose two column halves glu reads in place.
    if (T > cuda::kSkinnyMaxTokens && T <= kStackedGluMaxTokens && (dt == DType::BF16 || dt == DType::F16) &&
        follows(up.weight, gate.weight) && gate.weight.shape() == Shape{F, K} && F % 8 == 0 && !gate.bias.defined() &&
        !up.bias.defined() && out.numel() == T * F && (out.dtype() == DType::F32 || out.dtype() == dt) &&
        (gate.out.dtype() == DType::F32 || gate.out.dtype() == dt)) {
      require_device(x, "linear_glu", "input");
      require_device(out, "linear_glu", "out");
      if (x.dtype() == dt && (out.dtype() == DType::F32 || out.dtype() == dt) &&
          cuda::narrow_gemm_applies(x.raw(), gate.weight.raw(), dt, T, K)) {
        cuda::narrow_gemm_glu(act, x.raw(), gate.weight.raw(), dt, T, F, K, out.raw(), out.dtype(), stream_);
        return;
      }
      Tensor stacked = Tensor::view(gate.weight.raw(), dt, {2 * F, K}, gate.weight.owner(), Device::CUDA);
      Tensor all = empty(gate.out.dtype(), {T, 2 * F});
      linear(x, stacked, Tensor(), all);
      const size_t half = size_t(F) * dtype_size(all.dtype());
      if (cuda::glu_rows(act, all.raw(), static_cast<char*>(all.raw()) + half, all.dtype(), T, F, 2 * F, out.raw(),
                         out.dtype(), stream_))
        return;
    }
    Backend::linear_glu(act, x, gate, up, out);
  }

  void add(const Tensor& a, const Tensor& b, Tensor& out) override {
    require_f32(a, "add", "a");
    require_f32(b, "add", "b");
    require_f32(out, "add", "out");
    cuda::add(ptr(a), ptr(b), ptr(out), a.numel(), stream_);
  }

  void add_rms_norm(Tensor& x, const Tensor& delta, const Tensor& w, float eps, float offset, Tensor& out) override {
    require_f32(x, "add_rms_norm", "x");
    require_f32(delta, "add_rms_norm", "delta");
    require_device(w, "add_rms_norm", "weight");
    require_float(out, "add_rms_norm", "out");
    const int64_t D = x.dim(-1);
    TESSERA_CHECK(w.numel() == D && delta.numel() == x.numel() && out.numel() == x.numel(),
                  "add_rms_norm: shapes " + shape_str(x.shape()) + ", " + shape_str(delta.shape()) + ", weight " +
                      shape_str(w.shape()));
    cuda::add_rms_norm(ptr(x), ptr(delta), 1, 0, w.raw(), w.dtype(), eps, offset, x.numel() / D, D, out.raw(),
                       out.dtype(), stream_);
  }

  // Decode batches past the skinny product: where a product split over k ranges runs faster
  // (narrow_gemm on Hopper up to 64 tokens, else Gemm::splits), its partial sums go straight
  // into the residual add, whose pass sums them: the add+norm kernel stands in for a split-k
  // reduction.
  void linear_add_rms_norm(const Tensor& a, const LinearPart& p, Tensor& x, const Tensor& w, float eps, float offset,
                           Tensor& out) override {
    const int64_t K = a.dim(-1), T = a.numel() / K, N = p.weight.dim(0);
    const DType dt = p.weight.dtype();
    const bool eligible = T > cuda::kSkinnyMaxTokens && dt != DType::F32 && a.dtype() == dt && !p.bias.defined() &&
                          a.device() == Device::CUDA && p.weight.device() == Device::CUDA && x.dtype() == DType::F32 &&
                          p.weight.dim(1) == K && x.numel() == T * N;
    const bool narrow = eligible && cuda::narrow_gemm_applies(a.raw(), p.weight.raw(), dt, T, K);
    const int splits = narrow     ? cuda::narrow_gemm_splits(T, N, K, dt)
                       : eligible ? gemm_->splits(a.raw(), p.weight.raw(), dt, T, N, K)
                                  : 1;
    if (splits == 1 && !narrow) return Backend::linear_add_rms_norm(a, p, x, w, eps, offset, out);
    require_f32(x, "linear_add_rms_norm", "x");
    require_device(w, "linear_add_rms_norm", "weight");
    require_float(out, "linear_add_rms_norm", "out");
    TESSERA_CHECK(w.numel() == N && out.numel() == x.numel(),
                  "linear_add_rms_norm: x " + shape_str(x.shape()) + ", norm weight " + shape_str(w.shape()) +
                      ", out " + shape_str(out.shape()));
    Tensor parts = empty(DType::F32, {splits, T, N});
    if (narrow) cuda::narrow_gemm(a.raw(), p.weight.raw(), dt, T, N, K, splits, ptr(parts), stream_);
    else gemm_->run(a.raw(), p.weight.raw(), dt, parts.raw(), DType::F32, T, N, K, splits);
    cuda::add_rms_norm(ptr(x), ptr(parts), splits, T * N, w.raw(), w.dtype(), eps, offset, T, N, out.raw(),
                       out.dtype(), stream_);
  }

  // The GEMV's one or two tokens take the residual stream itself (cuda::GemvForm), so a layer
  // runs no add + norm kernel. On an H100 (bench_cuda decode tok/s, three rounds, 8B shapes,
  // context 512): batch 1 / 2 188.0-188.1 / 346.8-347.1 against 184.2-184.3 / 338.8-339.5.
  bool normalises_inputs(int64_t tokens) const override {
    return tokens >= 1 && tokens <= cuda::kGemvMaxTokens;
  }

  void fold_norm_weight(Tensor& w, const Tensor& norm, float offset) override {
    require_device(w, "fold_norm_weight", "weight");
    require_device(norm, "fold_norm_weight", "norm");
    require_float(norm, "fold_norm_weight", "norm");
    TESSERA_CHECK(
        !w.quantization() && w.ndim() == 2 && norm.numel() == w.dim(1),
        "fold_norm_weight: weight " + shape_str(w.shape()) + " for a norm of " + shape_str(norm.shape()));
    cuda::fold_norm_weight(w.raw(), w.dtype(), w.dim(0), w.dim(1), norm.raw(), norm.dtype(), offset, stream_);
  }

  void normed_rope_store_kv(const Tensor& x, const UnitNorm& n, const LinearPart& q, const LinearPart& k,
                            const LinearPart& v, const Tensor& positions, const RopeParams& p,
                            const Tensor& slots, Tensor& kc, Tensor& vc, const QkNorm* qk_norm) override {
    require_f32(x, "normed_rope_store_kv", "x");
    const LinearPart parts[] = {q, k, v};
    if (!linear_parts(x, parts, {cuda::GemvForm::Normed, n.eps}))
      return Backend::normed_rope_store_kv(x, n, q, k, v, positions, p, slots, kc, vc, qk_norm);
    const int64_t Dh = kc.dim(-1), T = q.out.dim(0);
    Tensor q3 = q.out.reshape({T, q.weight.dim(0) / Dh, Dh}),
           k3 = k.out.reshape({T, k.weight.dim(0) / Dh, Dh});
    rope_store_kv(q3, k3, v.out.reshape(k3.shape()), positions, p, slots, kc, vc, qk_norm);
  }

  void normed_glu(Glu act, const Tensor& x, const UnitNorm& n, const LinearPart& gate, const LinearPart& up,
                  Tensor& out) override {
    require_f32(x, "normed_glu", "x");
    if (!gemv_glu(act, x, gate, up, out, {cuda::GemvForm::Normed, n.eps}))
      Backend::normed_glu(act, x, n, gate, up, out);
  }

  void linear_add(const Tensor& a, const LinearPart& p, Tensor& x) override {
    require_f32(x, "linear_add", "x");
    TESSERA_CHECK(x.numel() == a.numel() / a.dim(-1) * p.weight.dim(0),
                  "linear_add: x " + shape_str(x.shape()) + " for " + shape_str(a.shape()) + " · " +
                      shape_str(p.weight.shape()) + "ᵀ");
    const LinearPart into_x{p.weight, p.bias, x};
    if (!linear_parts(a, {&into_x, 1}, {cuda::GemvForm::Add})) Backend::linear_add(a, p, x);
  }

  void argmax_rows(const Tensor& x, Tensor& out) override {
    require_f32(x, "argmax_rows", "x");
    require_i32(out, "argmax_rows", "out");
    const int64_t N = x.dim(-1), R = N ? x.numel() / N : 0;
    TESSERA_CHECK(N > 0 && out.numel() == R, "argmax_rows: " + shape_str(x.shape()) + " into " +
                                                 shape_str(out.shape()));
    const int splits = cuda::argmax_splits(R, N, sm_count_);
    Tensor scratch = empty(DType::F32, {2 * R * splits});
    cuda::argmax_rows(ptr(x), R, N, splits, ptr(scratch), ptr<int32_t>(out), stream_);
  }

  void sample_rows(const Tensor& x, const std::vector<RowSampling>& rows, Tensor& out) override {
    require_f32(x, "sample_rows", "x");
    require_i32(out, "sample_rows", "out");
    const int64_t V = x.dim(-1), R = V ? x.numel() / V : 0;
    TESSERA_CHECK(V > 0 && V < (int64_t(1) << 31) && R == int64_t(rows.size()) && out.numel() == R,
                  "sample_rows: " + shape_str(x.shape()) + " with " + std::to_string(rows.size()) + " rows into " +
                      shape_str(out.shape()));
    if (R == 0) return;
    Tensor host = Tensor::empty(DType::U8, {R * int64_t(sizeof(cuda::SampleParams))});
    auto* hp = reinterpret_cast<cuda::SampleParams*>(host.raw());
    for (int64_t r = 0; r < R; ++r) {
      const RowSampling& s = rows[size_t(r)];
      hp[r] = {s.temperature, s.top_k, s.top_p, s.min_p, s.u};
    }
    Tensor params = upload(host);
    const auto* dp = static_cast<const cuda::SampleParams*>(params.raw());
    // The draw indexes a call's logits with 32 bits: rows in groups below 2^31 logits.
    const int64_t group = std::max<int64_t>(1, ((int64_t(1) << 31) - 1) / V);
    for (int64_t r0 = 0; r0 < R; r0 += group) {
      const int64_t n = std::min(group, R - r0);
      const size_t bytes = cuda::sample_rows_workspace(hp + r0, n, V);
      Tensor work = empty(DType::U8, {int64_t(bytes)});
      cuda::sample_rows(ptr(x) + r0 * V, dp + r0, hp + r0, n, V, work.raw(), bytes, ptr<int32_t>(out) + r0, stream_);
    }
  }

  void edit_logits(Tensor& x, const std::vector<LogitEdit>& edits) override {
    require_f32(x, "edit_logits", "x");
    check_logit_edits(x, edits);
    if (edits.empty()) return;
    Tensor host = Tensor::empty(DType::U8, {int64_t(edits.size() * sizeof(LogitEdit))});
    std::memcpy(host.raw(), edits.data(), edits.size() * sizeof(LogitEdit));
    Tensor dev = upload(host);
    cuda::edit_logits(ptr(x), x.dim(-1), static_cast<const LogitEdit*>(dev.raw()), int64_t(edits.size()), stream_);
  }

  void logprobs(const Tensor& x, const Tensor& rows, const Tensor& tokens, int top_n, Tensor& out_lp,
                Tensor& out_ids) override {
    check_logprobs_shapes(x, rows, tokens, top_n, out_lp, out_ids);
    require_device(x, "logprobs", "x");
    require_device(rows, "logprobs", "rows");
    require_device(tokens, "logprobs", "tokens");
    require_device(out_lp, "logprobs", "out_lp");
    if (top_n > 0) require_device(out_ids, "logprobs", "out_ids");
    const int64_t V = x.dim(-1), n = rows.numel();
    Tensor work = empty(DType::U8, {std::max<int64_t>(1, int64_t(cuda::logprobs_workspace(V, n, top_n)))});
    cuda::logprobs(ptr(x), x.numel() / V, V, ptr<int32_t>(rows), n, ptr<int32_t>(tokens), top_n, ptr(out_lp),
                   top_n > 0 ? ptr<int32_t>(out_ids) : nullptr, work.raw(), stream_);
  }

  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override {
    require_f32(x, "gather_rows", "x");
    require_i32(rows, "gather_rows", "rows");
    require_f32(out, "gather_rows", "out");
    int64_t D = x.dim(0) ? x.numel() / x.dim(0) : 0;
    cuda::gather_rows(ptr(x), ptr<int32_t>(rows), rows.numel(), D, x.dim(0), ptr(out), stream_);
  }

  void scatter_add_rows(const Tensor& x, const Tensor& rows, const Tensor& weights, Tensor& out) override {
    require_f32(x, "scatter_add_rows", "x");
    require_i32(rows, "scatter_add_rows", "rows");
    require_f32(weights, "scatter_add_rows", "weights");
    require_f32(out, "scatter_add_rows", "out");
    const int64_t D = out.dim(0) ? out.numel() / out.dim(0) : 0;
    TESSERA_CHECK(x.numel() == rows.numel() * D && weights.numel() == rows.numel(),
                  "scatter_add_rows: x " + shape_str(x.shape()) + ", rows " + shape_str(rows.shape()) +
                      ", out " + shape_str(out.shape()));
    cuda::scatter_add_rows(ptr(x), ptr<int32_t>(rows), ptr(weights), rows.numel(), D, out.dim(0), ptr(out), stream_);
  }

  void moe_route(const Tensor& logits, int top_k, bool renormalize, Tensor& ids, Tensor& weights) override {
    require_f32(logits, "moe_route", "logits");
    require_i32(ids, "moe_route", "ids");
    require_f32(weights, "moe_route", "weights");
    const int64_t E = logits.dim(-1), T = E ? logits.numel() / E : 0;
    TESSERA_CHECK(top_k >= 1 && top_k <= E && top_k <= cuda::kMaxExpertsPerToken && ids.numel() == T * top_k &&
                      weights.numel() == T * top_k,
                  "moe_route: logits " + shape_str(logits.shape()) + ", top " + std::to_string(top_k) + " (at most " +
                      std::to_string(cuda::kMaxExpertsPerToken) + "), ids " + shape_str(ids.shape()));
    cuda::moe_route(ptr(logits), T, E, top_k, renormalize, ptr<int32_t>(ids), ptr(weights), stream_);
  }

  // With the experts stacked (upload_experts): every chosen expert in one launch a product, no
  // host round trip. The GEMV form takes up to 512 tokens (decode batches and short prompts); on
  // Hopper, 16-bit experts' products from kExpertTilesMinTokens on run on the tensor cores
  // (moe_tiles.cu), for prompts of any length. Elsewhere longer prompts group the tokens on the
  // host (Backend::moe_experts), where each expert's rows go through the products' paths.
  bool moe_experts_recordable(const Experts& e, int64_t tokens) const override {
    constexpr int64_t kMaxRowsTokens = 512;
    const int64_t E = int64_t(e.gate.size());
    if (!moe_on_device_ || E == 0 || E > cuda::kMaxExperts || e.up.size() != e.gate.size() ||
        e.down.size() != e.gate.size())
      return false;
    const Tensor &g0 = e.gate[0], &d0 = e.down[0];
    const DType dt = g0.dtype();
    if (g0.ndim() != 2 || d0.ndim() != 2 || d0.dim(0) != g0.dim(1) || d0.dim(1) != g0.dim(0) ||
        g0.dim(0) % 8 != 0 || g0.dim(1) % 8 != 0 || g0.device() != Device::CUDA || d0.device() != Device::CUDA ||
        reinterpret_cast<uintptr_t>(g0.raw()) % 16 != 0 || reinterpret_cast<uintptr_t>(d0.raw()) % 16 != 0 ||
        (dt != DType::BF16 && dt != DType::F16 && dt != DType::F32))
      return false;
    for (size_t i = 0; i < e.gate.size(); ++i)
      if (e.gate[i].shape() != g0.shape() || e.down[i].shape() != d0.shape() || !follows(e.up[i], e.gate[i]) ||
          e.up[i].dim(0) != g0.dim(0) ||
          (i > 0 && (!follows(e.gate[i], e.up[i - 1]) || !follows(e.down[i], e.down[i - 1]))))
        return false;
    return d0.dtype() == dt && (tokens <= kMaxRowsTokens || cuda::expert_tiles_apply(dt, tokens, g0.dim(1), g0.dim(0)));
  }

  void moe_experts(Glu act, const Tensor& h, const Tensor& ids, const Tensor& weights, const Experts& e,
                   Tensor& x) override {
    const int64_t T = h.dim(0);
    if (!moe_experts_recordable(e, T)) return Backend::moe_experts(act, h, ids, weights, e, x);
    require_f32(h, "moe_experts", "h");
    require_f32(x, "moe_experts", "x");
    require_i32(ids, "moe_experts", "ids");
    require_f32(weights, "moe_experts", "weights");
    const int64_t H = e.gate[0].dim(1), I = e.gate[0].dim(0), E = int64_t(e.gate.size());
    const int64_t k = T ? ids.numel() / T : 0;
    TESSERA_CHECK(h.ndim() == 2 && h.dim(1) == H && x.shape() == h.shape() && ids.numel() == T * k &&
                      weights.numel() == T * k,
                  "moe_experts: h " + shape_str(h.shape()) + ", x " + shape_str(x.shape()) + ", ids " +
                      shape_str(ids.shape()) + ", weights " + shape_str(weights.shape()) + ", experts of " +
                      shape_str(e.gate[0].shape()));
    if (T == 0 || k == 0) return;
    const DType dt = e.gate[0].dtype();
    const bool tiled = cuda::expert_tiles_apply(dt, T, H, I);
    Tensor slots = empty(DType::I32, {std::min(E, T * k), 4}), place = empty(DType::I32, {T * k}),
           pair_at = empty(DType::I32, {T * k}), mid = empty(tiled ? dt : DType::F32, {T * k, I}),
           out = empty(DType::F32, {T * k, H});
    cuda::ExpertsArgs a{ptr(h), T, H, I, E, k, ptr<int32_t>(ids), ptr(weights), e.gate[0].raw(),
                        e.down[0].raw(), ptr<int32_t>(slots), ptr<int32_t>(place), ptr<int32_t>(pair_at),
                        mid.raw(), ptr(out), ptr(x)};
    Tensor tiles, x16;
    if (tiled) {
      tiles = empty(DType::I32, {cuda::expert_tiles_max(T * k, E), 4}), x16 = empty(dt, {T * k, H});
      a.tiles = ptr<int32_t>(tiles), a.x16 = x16.raw();
    }
    cuda::moe_experts(act, dt, a, stream_);
  }

 private:
  // Returns once the source has been read (see upload()).
  void copy_from_host(void* dst, const Tensor& host) {
    if (host.nbytes() < StagedCopier::kMinBytes)
      TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, host.raw(), host.nbytes(), cudaMemcpyHostToDevice, stream_));
    else
      staging_.copy(dst, host.raw(), host.nbytes(), stream_);
  }

  // Quantized weights of one width, bits, group size and scale dtype as one weight: the codes,
  // the scales and the biases each stacked (part after part), so the group runs as one product.
  std::vector<Tensor> upload_quantized_group(const std::vector<Tensor>& hosts) {
    const Tensor& first = hosts.front();
    bool stackable = true;
    int64_t rows = 0;
    for (const Tensor& h : hosts) {
      stackable = stackable && h.device() == Device::CPU && same_quantization(h, first);
      rows += stackable ? h.dim(0) : 0;
    }
    std::vector<Tensor> out;
    if (!stackable) {
      for (const Tensor& h : hosts) out.push_back(upload(h));
      return out;
    }
    const Quantization& q = *first.quantization();
    const int64_t K = first.dim(1), groups = K / q.group_size;
    Tensor codes = empty(DType::U32, {rows * K * q.bits / 32});
    Tensor all = Tensor::quantized(codes, {rows, K},
                                   {q.bits, q.group_size, empty(q.scales.dtype(), {rows, groups}),
                                    empty(q.biases.dtype(), {rows, groups})});
    int64_t row = 0;
    for (const Tensor& h : hosts) {
      out.push_back(all.slice_rows(row, row + h.dim(0)));
      row += h.dim(0);
      const Tensor& dev = out.back();
      TESSERA_CHECK(dev.nbytes() == h.nbytes() && h.quantization()->scales.numel() == h.dim(0) * groups &&
                        h.quantization()->biases.numel() == h.dim(0) * groups,
                    "upload_group: quantized weight " + shape_str(h.shape()) + " with " +
                        std::to_string(h.quantization()->scales.numel()) + " scales");
      copy_from_host(dev.raw(), h);
      copy_from_host(dev.quantization()->scales.raw(), h.quantization()->scales);
      copy_from_host(dev.quantization()->biases.raw(), h.quantization()->biases);
    }
    return out;
  }

  // Products with quantized weights, f32 x and out, the whole group in one launch where it is
  // stacked: up to kQmmaMaxTokens (4 or 8 bits, bf16 or f16 scales) qmma reads the codes once for
  // the tensor cores; else up to kQgemvMaxTokens tokens (4 or 8 bits) qgemv does. Else each
  // stacked group (or weight) is widened to its scales' dtype into scratch and multiplied as a
  // 16-bit (or f32) weight, through the paths above. TESSERA_CUDA_CODE_PRODUCTS=0 widens for every
  // product.
  void quantized_linear_group(const Tensor& x, std::span<const LinearPart> parts) {
    const LinearPart& first = parts.front();
    const int64_t K = x.dim(-1), T = K ? x.numel() / K : 0;
    require_float(x, "linear", "input");
    // Parts of other widths or groups (mlx-lm's mixed quantization): each on its own.
    if (!std::all_of(parts.begin(), parts.end(),
                     [&](const LinearPart& p) { return same_quantization(p.weight, first.weight); })) {
      for (const LinearPart& p : parts) linear_parts(x, {&p, 1});
      return;
    }
    bool stacked = true;
    const Tensor* prev = nullptr;
    for (const LinearPart& p : parts) {
      TESSERA_CHECK(p.weight.dim(1) == K, "linear: quantized weight " + shape_str(p.weight.shape()) +
                                              " for input " + shape_str(x.shape()));
      require_device(p.out, "linear", "out");
      TESSERA_CHECK(p.out.numel() == T * p.weight.dim(0), "linear: output " + shape_str(p.out.shape()) +
                                                              " for weight " + shape_str(p.weight.shape()));
      if (prev) stacked = stacked && follows_quantized(p.weight, *prev);
      prev = &p.weight;
    }
    if (T == 0) return;
    const cuda::QuantizedMatrix w0 = quantized_matrix(first.weight);
    const bool f32_io = x.dtype() == DType::F32 &&
                        std::all_of(parts.begin(), parts.end(),
                                    [](const LinearPart& p) { return p.out.dtype() == DType::F32; });
    if (f32_io && stacked && int64_t(parts.size()) <= cuda::StackedParts::kMaxParts) {
      cuda::StackedParts g;
      for (const LinearPart& p : parts) {
        g.w[g.count] = p.weight.raw(), g.out[g.count] = p.out.raw();
        g.rows_end[g.count] = (g.count ? g.rows_end[g.count - 1] : 0) + p.weight.dim(0);
        ++g.count;
      }
      const bool mma = code_products_ && cuda::qmma_applies(w0, T, K);
      if (mma) {
        const Tensor x16 = T > cuda::kQmmaSelfPackTokens ? empty(w0.scale_dtype, {T, K}) : Tensor();
        const int64_t N = g.rows_end[g.count - 1];
        const int splits = cuda::qmma_splits(w0, T, N, K);
        const Tensor part = splits > 1 ? empty(DType::F32, {splits, T, N}) : Tensor();
        cuda::qmma(ptr(x), x16.raw(), w0, g, T, K, ptr(part), splits, stream_);
      }
      if (mma || (code_products_ && cuda::qgemv(ptr(x), w0, g, T, K, stream_))) {
        for (const LinearPart& p : parts)
          if (p.bias.defined()) {
            require_device(p.bias, "linear", "bias");
            cuda::add_bias(p.out.raw(), DType::F32, p.bias.raw(), p.bias.dtype(), T, p.weight.dim(0),
                           stream_);
          }
        return;
      }
    }
    // Widened: a stacked group as one matrix (whose parts the 16-bit paths may run as one
    // product), else each weight on its own.
    auto widened = [&](const Tensor& w, int64_t rows) {
      const DType dt = w.quantization()->scales.dtype();
      Tensor dense = empty(dt, {rows, K});
      cuda::widen(quantized_matrix(w), nullptr, 0, rows, K, 1.0f, dense.raw(), dt, stream_);
      return dense;
    };
    if (stacked) {
      int64_t rows = 0;
      for (const LinearPart& p : parts) rows += p.weight.dim(0);
      const Tensor dense = widened(first.weight, rows);
      std::vector<Tensor> views;
      std::vector<LinearPart> dense_parts;
      views.reserve(parts.size());  // dense_parts refer to them
      int64_t row = 0;
      for (const LinearPart& p : parts) {
        views.push_back(dense.slice_rows(row, row + p.weight.dim(0)));
        row += p.weight.dim(0);
        dense_parts.push_back({views.back(), p.bias, p.out});
      }
      linear_parts(x, dense_parts);
      return;
    }
    for (const LinearPart& p : parts) linear(x, widened(p.weight, p.weight.dim(0)), p.bias, p.out);
  }

  // Splits the keys of each query into ranges of at least min_keys when fewer than target
  // (token, kv head) blocks per SM would run and the contexts are long enough to share.
  int attention_splits(int64_t blocks, int max_context_len, int min_keys, int target) const {
    if (blocks >= target * sm_count_ || max_context_len < 2 * min_keys) return 1;
    int64_t want = (target * sm_count_ + blocks - 1) / blocks;
    return int(std::clamp<int64_t>(std::min<int64_t>(want, max_context_len / min_keys), 1, 32));
  }

  // Groups run as one stacked product up to this many tokens (beyond, the parts' own products
  // are efficient and the scatter would cost), when a part is narrower than kNarrowRows (wide
  // parts such as gate/up measured faster apart).
  static constexpr int64_t kStackedMaxTokens = 512, kNarrowRows = 4096;
  // gate/up as one stacked product before glu up to this many tokens. Measured on the H200 (8B
  // shapes, bench_cuda decode tok/s, three rounds, apart / stacked): batch 32 5,654 / 5,696, 64
  // 9,420 / 9,595, 128 14,725 / 14,820, but 256 18,440 / 18,203.
  static constexpr int64_t kStackedGluMaxTokens = 128;
  static constexpr int64_t kFlashDecodeMinBlocks = 64;

  std::string name_;
  int sm_count_ = 1;
  size_t smem_optin_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t downloaded_ = nullptr;  // recorded after each download_async
  std::shared_ptr<DeviceAllocator> alloc_;
  std::shared_ptr<DeviceAllocator> recording_alloc_;  // what ops allocate while recording
  bool recording_ = false;
  // TESSERA_CUDA_MOE=0 groups every step's tokens by expert on the host, for side-by-side
  // measurements.
  const bool moe_on_device_ = !cuda::switched_off("TESSERA_CUDA_MOE");
  // TESSERA_CUDA_CODE_PRODUCTS=0 widens quantized weights for every product (no qmma, no qgemv),
  // for side-by-side measurements.
  const bool code_products_ = !cuda::switched_off("TESSERA_CUDA_CODE_PRODUCTS");
  std::unique_ptr<cuda::Gemm> gemm_;
  StagedCopier staging_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }

}  // namespace tessera

extern "C" __attribute__((visibility("default"))) tessera::Backend* tessera_cuda_create_backend(
    int abi, int device, char* error, unsigned long error_size) {
  auto fail = [&](const std::string& msg) -> tessera::Backend* {
    if (error && error_size) {
      std::strncpy(error, msg.c_str(), error_size - 1);
      error[error_size - 1] = '\0';
    }
    return nullptr;
  };
  if (abi != TESSERA_CUDA_PLUGIN_ABI)
    return fail("plugin ABI " + std::to_string(TESSERA_CUDA_PLUGIN_ABI) + " but the core expects " +
                std::to_string(abi));
  try {
    return tessera::make_cuda_backend(device).release();
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
