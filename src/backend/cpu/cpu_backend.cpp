// The CPU backend: host memory, and either the reference ops or the fast paths.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "backend/backend.h"
#include "backend/cpu/fast_ops.h"
#include "backend/cpu/reference_ops.h"
#include "core/error.h"

namespace tessera {
namespace {

// 16-bit activations (see backend.h): the CPU computes in f32, so a 16-bit input is widened to
// an f32 copy and a 16-bit output is computed in f32 and rounded once.
Tensor widened(const Tensor& t) {
  if (t.dtype() == DType::F32) return t;
  Tensor f = Tensor::empty(DType::F32, t.shape());
  cpu::ref::to_f32(t, 0, t.numel(), f.data<float>());
  return f;
}
template <class F>
void into(Tensor& out, F&& op) {
  if (out.dtype() == DType::F32) return op(out);
  Tensor f = Tensor::empty(DType::F32, out.shape());
  op(f);
  cpu::ref::from_f32(f.data<float>(), f.numel(), out, 0);
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuOptions& opts) : reference_(opts.reference) {
    if (opts.threads > 0) ThreadPool::set_global_threads(opts.threads);
    pool_ = &ThreadPool::global();
  }

  std::string name() const override { return reference_ ? "cpu-reference" : "cpu"; }
  Device device() const override { return Device::CPU; }

  Tensor empty(DType dtype, Shape shape) override {
    // Uninitialised: activations are always fully written by the op that produces them.
    size_t bytes = size_t(std::max<int64_t>(1, shape_numel(shape))) * dtype_size(dtype);
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    TESSERA_CHECK(p, "out of memory allocating " + std::to_string(bytes) + " bytes");
    return Tensor::view(p, dtype, std::move(shape), std::shared_ptr<void>(p, std::free));
  }
  Tensor upload(const Tensor& host) override { return host; }
  // linear and embedding read codes in place (dequantizing in registers); ops built on linear
  // call it.
  bool holds_quantized() const override { return true; }
  void download(const Tensor& src, void* dst) override { std::memcpy(dst, src.raw(), src.nbytes()); }
  MemoryInfo memory_info() override {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    MemoryInfo m{size_t(sysconf(_SC_PHYS_PAGES)) * page, size_t(sysconf(_SC_AVPHYS_PAGES)) * page};
    // MemAvailable also counts the page cache the kernel can drop; free pages alone undercount.
    std::ifstream in("/proc/meminfo");
    for (std::string key; in >> key;) {
      size_t kib = 0;
      in >> kib;
      if (key == "MemAvailable:") m.free = kib * 1024;
      in.ignore(64, '\n');
    }
    return m;
  }

  void embedding(const Tensor& table, const Tensor& ids, float scale, Tensor& out) override {
    if (reference_) cpu::ref::embedding(table, ids, scale, out);
    else cpu::fast::embedding(*pool_, table, ids, scale, out);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, float offset, Tensor& out) override {
    into(out, [&](Tensor& o) {
      if (reference_) cpu::ref::rms_norm(x, w, eps, offset, o);
      else cpu::fast::rms_norm(*pool_, x, w, eps, offset, o);
    });
  }
  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) override {
    const Tensor xf = widened(x);
    into(out, [&](Tensor& o) {
      if (reference_) cpu::ref::linear(xf, w, bias, o);
      else cpu::fast::linear(*pool_, xf, w, bias, o);
    });
  }
  void rope(Tensor& x, const Tensor& positions, const RopeParams& p) override {
    if (reference_) cpu::ref::rope(x, positions, p);
    else cpu::fast::rope(*pool_, x, positions, p);
  }
  void store_kv(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& kc, Tensor& vc) override {
    if (reference_) cpu::ref::store_kv(k, v, slots, kc, vc);
    else cpu::fast::store_kv(*pool_, k, v, slots, kc, vc);
  }
  void attention(const Tensor& q, const Tensor& kc, const Tensor& vc, const AttentionMeta& m,
                 const AttentionParams& p, Tensor& out) override {
    into(out, [&](Tensor& o) {
      if (reference_) cpu::ref::attention(q, kc, vc, m, p, o);
      else cpu::fast::attention(*pool_, q, kc, vc, m, p, o);
    });
  }
  void glu(Glu act, const Tensor& gate, const Tensor& up, Tensor& out) override {
    const Tensor gf = widened(gate), uf = widened(up);
    into(out, [&](Tensor& o) {
      if (reference_) cpu::ref::glu(act, gf, uf, o);
      else cpu::fast::glu(*pool_, act, gf, uf, o);
    });
  }
  void softcap(Tensor& x, float cap) override {
    if (reference_) cpu::ref::softcap(x, cap);
    else cpu::fast::softcap(*pool_, x, cap);
  }
  void add(const Tensor& a, const Tensor& b, Tensor& out) override {
    if (reference_) cpu::ref::add(a, b, out);
    else cpu::fast::add(*pool_, a, b, out);
  }
  // A row copy (memcpy) in the reference already.
  void argmax_rows(const Tensor& x, Tensor& out) override { cpu::ref::argmax_rows(x, out); }

  void scatter_add_rows(const Tensor& x, const Tensor& rows, const Tensor& weights, Tensor& out) override {
    cpu::ref::scatter_add_rows(x, rows, weights, out);
  }
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override {
    cpu::ref::gather_rows(x, rows, out);
  }
  // A few exps and a partial sort a token.
  void moe_route(const Tensor& logits, int top_k, bool renormalize, Tensor& ids, Tensor& weights) override {
    cpu::ref::moe_route(logits, top_k, renormalize, ids, weights);
  }
  // The engine samples on the host on a CPU (engine/sampler: the same draw, faster); this is the
  // reference a device's sampler is tested against.
  void edit_logits(Tensor& x, const std::vector<LogitEdit>& edits) override { cpu::ref::edit_logits(x, edits); }
  void sample_rows(const Tensor& x, const std::vector<RowSampling>& rows, Tensor& out) override {
    cpu::ref::sample_rows(x, rows, out);
  }
  void logprobs(const Tensor& x, const Tensor& rows, const Tensor& tokens, int top_n, Tensor& out_lp,
                Tensor& out_ids) override {
    cpu::ref::logprobs(x, rows, tokens, top_n, out_lp, out_ids);
  }

 private:
  bool reference_;
  ThreadPool* pool_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuOptions& opts) { return std::make_unique<CpuBackend>(opts); }

}  // namespace tessera
