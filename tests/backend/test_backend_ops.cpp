// Every op of backend.h, on every backend under test, against the CPU reference backend: the same
// random inputs on both sides, outputs poisoned with NaN before the call, scored by
// NMSE = mse(out, ref) / mse(ref, 0) under a per-op limit (see op_cases.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>

#include "backend/backend.h"
#include "backend/cpu/fast_ops.h"
#include "backend/cuda_loader.h"
#include "op_cases.h"

namespace tessera::test {
namespace {

struct BackendUnderTest {
  std::string name;
  // Returns nullptr, with *why set, where the backend is not available (no GPU, no plugin).
  std::function<std::unique_ptr<Backend>(std::string* why)> make;
  // The NMSE limit of a case on this backend: the case's own unless the backend rounds more.
  std::function<double(const OpCase&)> limit = [](const OpCase& c) { return c.max_nmse; };
  // Whether the backend implements the case (it throws on the rest).
  std::function<bool(const OpCase&)> supports = [](const OpCase&) { return true; };
  std::vector<std::string> ops = {};  // the ops it is tested on; empty: all
};

// The CUDA backend rounds activations to a 16-bit weight's format before its tensor-core
// products (bf16: 8 bits of mantissa, f16: 11), and uses the GPU's exp/sin/cos. With a bf16
// cache its tensor-core attention rounds q and the softmax weights to bf16 for its two products.
// linear_add_rms_norm's cases give a 16-bit input only in the weights' format (f32 only where the
// GEMV keeps it f32), so nothing is rounded beyond the output: the case's own limit.
// Quantized weights (U32) are widened to their scales' dtype for the products of more tokens than
// the decode product's, then rounded as such weights are.
double cuda_limit(const OpCase& c) {
  const DType w = c.dtype == DType::U32 ? c.values : c.dtype;
  if (c.op == "linear" || c.op == "linear_add" || c.op == "linear_glu" || c.op == "normed_glu" ||
      c.op == "linear_rope_store_kv" || c.op == "normed_rope_store_kv")
    return w == DType::BF16 ? 1e-4 : w == DType::F16 ? 1e-5 : 1e-9;
  // The experts' tiles round h and act(gate) * up to 16 bits: on these cases that rounding alone,
  // done on the host in f64, gives NMSE up to 4.3e-6 in bf16 (the H200 measured 4.29e-6) and
  // 4.8e-8 in f16. Rounding by truncation would give about 4x as much.
  if (c.op == "moe_experts" && c.dtype != DType::F32) return c.dtype == DType::BF16 ? 1e-5 : 1.5e-7;
  if (c.op == "attention" && c.dtype == DType::BF16) return 1e-4;
  if (c.op == "rope") return 1e-10;
  if (c.op == "rope_store_kv") return std::max(c.max_nmse, 1e-10);
  if (c.op == "glu" || c.op == "softcap") return std::max(c.max_nmse, 1e-11);
  return c.max_nmse;
}

// One line per backend. The CPU fast paths run once with the best instruction set of this CPU
// (AVX-512 where present) and once held to the AVX2 baseline.
const std::vector<BackendUnderTest>& backends_under_test() {
  using namespace cpu::fast;
  static const std::vector<BackendUnderTest> list = {
      {"cpu", [](std::string*) { return set_isa(best_isa()), make_cpu_backend(); }},
      {"cpu_avx2", [](std::string*) { return set_isa(Isa::Avx2), make_cpu_backend(); }},
      // Its attention kernels read f32 and bf16 caches, not f16 ones.
      {"cuda", [](std::string* why) { return load_cuda_backend(0, why); }, cuda_limit,
       [](const OpCase& c) { return !(c.op == "attention" && c.dtype == DType::F16); }},
      // Every product it may split over k ranges split into 4, whatever its timing says.
      {"cuda_split_k",
       [](std::string* why) {
         setenv("TESSERA_CUDA_SPLIT_K", "4", 1);
         auto be = load_cuda_backend(0, why);
         unsetenv("TESSERA_CUDA_SPLIT_K");
         return be;
       },
       cuda_limit,
       [](const OpCase&) { return true; },
       {"linear_add_rms_norm", "linear_rope_store_kv"}},
  };
  return list;
}

double nmse(const std::vector<float>& out, const std::vector<float>& ref) {
  double err = 0, sig = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double d = double(out[i]) - ref[i];
    err += d * d;
    sig += double(ref[i]) * ref[i];
  }
  return sig > 0 ? err / sig : (err > 0 ? INFINITY : 0);
}

size_t count_non_finite(const std::vector<float>& v) {
  size_t n = 0;
  for (float x : v) n += !std::isfinite(x);
  return n;
}

// Runs one case on `be` and on `ref`; returns what is wrong (empty when it passes) and the worst NMSE.
std::vector<std::string> check_case(const OpCase& c, double limit, Backend& be, Backend& ref, double& worst) {
  std::vector<std::string> faults;
  auto want = c.run(ref);
  auto got = c.run(be);
  if (got.size() != want.size()) return {"wrong number of outputs"};
  for (size_t i = 0; i < want.size(); ++i) {
    std::string out = "output " + std::to_string(i) + ": ";
    if (count_non_finite(want[i])) faults.push_back(out + "the reference is not finite");
    if (size_t n = count_non_finite(got[i])) faults.push_back(out + std::to_string(n) + " unwritten (NaN) or non-finite elements");
    double e = nmse(got[i], want[i]);
    if (!(e <= limit)) {
      char msg[96];
      std::snprintf(msg, sizeof msg, "NMSE %.3g over the limit %.3g", e, limit);
      faults.push_back(out + msg);
    }
    worst = std::max(worst, e);
  }
  return faults;
}

using Param = std::tuple<size_t, std::string>;  // (index into backends_under_test, op)

class BackendOps : public ::testing::TestWithParam<Param> {};

TEST_P(BackendOps, MatchesReference) {
  const auto& [index, op] = GetParam();
  const BackendUnderTest& bt = backends_under_test()[index];
  std::string why;
  std::unique_ptr<Backend> be = bt.make(&why);
  if (!be) GTEST_SKIP() << "backend " << bt.name << " is not available here: " << why;
  std::unique_ptr<Backend> ref = make_cpu_backend({.reference = true});

  std::vector<OpCase> cases = op_cases(op);
  ASSERT_FALSE(cases.empty()) << "no cases for op " << op;
  double worst = 0, limit = 0;
  size_t skipped = 0;
  for (const OpCase& c : cases) {
    if (!bt.supports(c)) {
      ++skipped;
      continue;
    }
    double l = bt.limit(c);
    for (const auto& f : check_case(c, l, *be, *ref, worst)) ADD_FAILURE() << c.name << ": " << f;
    limit = std::max(limit, l);
  }
  std::cout << bt.name << " " << op << ": " << cases.size() - skipped << " cases, worst NMSE " << worst << " (limit "
            << limit << ")";
  if (skipped) std::cout << ", " << skipped << " not supported by the backend";
  std::cout << "\n";
}

std::vector<Param> all_params() {
  std::vector<Param> ps;
  for (size_t b = 0; b < backends_under_test().size(); ++b)
    for (const auto& op : op_names()) {
      const auto& only = backends_under_test()[b].ops;
      if (only.empty() || std::find(only.begin(), only.end(), op) != only.end()) ps.emplace_back(b, op);
    }
  return ps;
}

INSTANTIATE_TEST_SUITE_P(Ops, BackendOps, ::testing::ValuesIn(all_params()), [](const auto& info) {
  return backends_under_test()[std::get<0>(info.param)].name + "_" + std::get<1>(info.param);
});

// The harness itself must catch a backend that leaves an element unwritten or is slightly off.
class Faulty final : public Backend {
 public:
  enum class Fault { Unwritten, Perturbed, SkippedRow };
  explicit Faulty(Fault f) : fault_(f), ref_(make_cpu_backend({.reference = true})) {}
  std::string name() const override { return "faulty"; }
  Device device() const override { return Device::CPU; }
  Tensor empty(DType dt, Shape s) override { return ref_->empty(dt, std::move(s)); }
  Tensor upload(const Tensor& h) override { return ref_->upload(h); }
  void download(const Tensor& s, void* d) override { ref_->download(s, d); }
  MemoryInfo memory_info() override { return ref_->memory_info(); }
  void embedding(const Tensor& t, const Tensor& i, float s, Tensor& o) override { ref_->embedding(t, i, s, o); }
  void rms_norm(const Tensor& x, const Tensor& w, float e, float off, Tensor& o) override { ref_->rms_norm(x, w, e, off, o); }
  void linear(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out) override {
    ref_->linear(x, w, b, out);
    if (out.numel() == 0) return;
    const bool f32 = out.dtype() == DType::F32;
    // The last element left as it was (NaN): an unwritten output.
    if (fault_ == Fault::Unwritten) {
      if (f32) out.data<float>()[out.numel() - 1] = std::nanf("");
      else out.data<uint16_t>()[out.numel() - 1] = 0x7fff;  // NaN in bf16 and f16
    }
    // A systematic relative error of 1e-4 (say, a conversion that drops the low bits): NMSE 1e-8;
    // 16-bit outputs one unit off (a wrong rounding).
    if (fault_ == Fault::Perturbed)
      for (int64_t i = 0; i < out.numel(); ++i) {
        if (f32) out.data<float>()[i] *= 1.0001f;
        else out.data<uint16_t>()[i] += 1;
      }
  }
  void rope(Tensor& x, const Tensor& p, const RopeParams& rp) override { ref_->rope(x, p, rp); }
  void store_kv(const Tensor& k, const Tensor& v, const Tensor& s, Tensor& kc, Tensor& vc) override {
    int64_t T = k.dim(0);
    if (fault_ == Fault::SkippedRow && T > 1) {
      ref_->store_kv(k.slice_rows(0, T - 1), v.slice_rows(0, T - 1), s.slice_rows(0, T - 1), kc, vc);
    } else {
      ref_->store_kv(k, v, s, kc, vc);
    }
  }
  void attention(const Tensor& q, const Tensor& kc, const Tensor& vc, const AttentionMeta& m,
                 const AttentionParams& p, Tensor& o) override { ref_->attention(q, kc, vc, m, p, o); }
  void glu(Glu a, const Tensor& g, const Tensor& u, Tensor& o) override { ref_->glu(a, g, u, o); }
  void softcap(Tensor& x, float cap) override { ref_->softcap(x, cap); }
  void add(const Tensor& a, const Tensor& b, Tensor& o) override { ref_->add(a, b, o); }
  void gather_rows(const Tensor& x, const Tensor& r, Tensor& o) override { ref_->gather_rows(x, r, o); }
  void scatter_add_rows(const Tensor& x, const Tensor& r, const Tensor& w, Tensor& o) override {
    ref_->scatter_add_rows(x, r, w, o);
  }
  void moe_route(const Tensor& l, int k, bool r, Tensor& ids, Tensor& w) override { ref_->moe_route(l, k, r, ids, w); }
  void argmax_rows(const Tensor& x, Tensor& o) override { ref_->argmax_rows(x, o); }
  void sample_rows(const Tensor& x, const std::vector<RowSampling>& r, Tensor& o) override { ref_->sample_rows(x, r, o); }
  void edit_logits(Tensor& x, const std::vector<LogitEdit>& e) override { ref_->edit_logits(x, e); }
  void logprobs(const Tensor& x, const Tensor& r, const Tensor& t, int n, Tensor& lp, Tensor& ids) override {
    ref_->logprobs(x, r, t, n, lp, ids);
  }

 private:
  Fault fault_;
  std::unique_ptr<Backend> ref_;
};

TEST(BackendOpsHarness, CatchesFaults) {
  auto ref = make_cpu_backend({.reference = true});
  // (cases with outputs, cases that failed)
  auto failures = [&](Faulty::Fault f, const std::string& op) {
    Faulty faulty(f);
    size_t with_output = 0, failed = 0;
    double worst = 0;
    for (const OpCase& c : op_cases(op)) {
      with_output += !c.run(*ref).front().empty();
      failed += !check_case(c, c.max_nmse, faulty, *ref, worst).empty();
    }
    return std::pair{with_output, failed};
  };
  auto [unwritten_cases, unwritten_failed] = failures(Faulty::Fault::Unwritten, "linear");
  EXPECT_EQ(unwritten_failed, unwritten_cases);
  auto [perturbed_cases, perturbed_failed] = failures(Faulty::Fault::Perturbed, "linear");
  EXPECT_EQ(perturbed_failed, perturbed_cases);
  EXPECT_GT(failures(Faulty::Fault::SkippedRow, "store_kv").second, 0u);
}

}  // namespace
}  // namespace tessera::test
