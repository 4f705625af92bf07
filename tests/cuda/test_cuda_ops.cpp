// Every CUDA op against the CPU reference backend on random inputs of several shapes and weight
// dtypes. Outputs start as NaN, so an element the op fails to write fails the check. The error
// is the normalised mean squared error sum((got - want)^2) / sum(want^2); each case prints it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>

#include "backend/cuda_loader.h"
#include "core/error.h"
#include "cuda_testutil.h"

namespace tessera {
namespace {

// Limits: f32 differs from the reference only in summation order and libm ulps; 16-bit weights
// also round the activations to the weight's format before the product (bf16: 8 bits of
// mantissa, f16: 11).
double limit_for(DType weights) {
  switch (weights) {
    case DType::BF16: return 1e-4;
    case DType::F16: return 1e-5;
    default: return 1e-9;
  }
}

Backend& reference() {
  static std::unique_ptr<Backend> be = make_cpu_backend({.reference = true, .threads = 1});
  return *be;
}

// Normal values scaled by `scale`, stored in `dt` (f32 tensors hold values exact in `round_to`).
Tensor random_host(DType dt, Shape shape, float scale, std::mt19937& rng, DType round_to = DType::F32) {
  Tensor t = Tensor::empty(dt, std::move(shape));
  std::normal_distribution<float> nd(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = nd(rng);
    if (round_to == DType::BF16) v = bf16_to_f32(f32_to_bf16(v));
    switch (dt) {
      case DType::F32: t.data<float>()[i] = v; break;
      case DType::BF16: t.data<uint16_t>()[i] = f32_to_bf16(v); break;
      case DType::F16: t.data<uint16_t>()[i] = f32_to_f16(v); break;
      default: throw Error("random_host: dtype");
    }
  }
  return t;
}

Tensor host_i32(const std::vector<int32_t>& v, Shape shape) {
  Tensor t = Tensor::empty(DType::I32, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

// An output filled with NaN, so that any element an op fails to write is caught.
Tensor poisoned(Backend& be, Shape shape, DType dt = DType::F32) {
  Tensor h = Tensor::empty(dt, std::move(shape));
  for (int64_t i = 0; i < h.numel(); ++i) {
    if (dt == DType::F32) h.data<float>()[i] = NAN;
    else h.data<uint16_t>()[i] = dt == DType::BF16 ? f32_to_bf16(NAN) : f32_to_f16(NAN);
  }
  return be.upload(h);
}

std::vector<float> to_host_f32(Backend& be, const Tensor& t) {
  std::vector<float> out(size_t(t.numel()));
  if (t.dtype() == DType::F32) {
    be.download(t, out.data());
  } else {
    std::vector<uint16_t> raw(out.size());
    be.download(t, raw.data());
    for (size_t i = 0; i < raw.size(); ++i)
      out[i] = t.dtype() == DType::BF16 ? bf16_to_f32(raw[i]) : f16_to_f32(raw[i]);
  }
  return out;
}

std::vector<float> host_values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// Infinite when any element is NaN or infinite.
double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    double d = double(got[i]) - want[i];
    num += d * d;
    den += double(want[i]) * want[i];
  }
  return den > 0 ? num / den : num;
}

void expect_close(const std::string& op, const std::string& name, const std::vector<float>& got,
                  const std::vector<float>& want, double limit) {
  ASSERT_EQ(got.size(), want.size()) << op << " " << name;
  double e = nmse(got, want);
  std::printf("NMSE %-12s %-44s %.3e (limit %.0e)\n", op.c_str(), name.c_str(), e, limit);
  EXPECT_LE(e, limit) << op << " " << name;
}

std::string dname(DType t) { return std::string(dtype_name(t)); }

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof(buf), f, ap);
  va_end(ap);
  return buf;
}

const DType kWeightTypes[] = {DType::F32, DType::BF16, DType::F16};

TEST(CudaLoader, MissingPluginIsAClearError) {
  const char* old = std::getenv("TESSERA_CUDA_PLUGIN");
  std::string saved = old ? old : "";
  setenv("TESSERA_CUDA_PLUGIN", "/nonexistent/libtessera_cuda.so", 1);
  std::string error;
  auto be = load_cuda_backend(0, &error);
  if (old) setenv("TESSERA_CUDA_PLUGIN", saved.c_str(), 1);
  else unsetenv("TESSERA_CUDA_PLUGIN");
  EXPECT_EQ(be, nullptr);
  EXPECT_EQ(error.rfind("CUDA backend not available: ", 0), 0u) << error;
  EXPECT_NE(error.find("/nonexistent/libtessera_cuda.so"), std::string::npos) << error;
}

TEST(CudaOps, Embedding) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(1);
  for (DType dt : kWeightTypes)
    for (auto [V, D, T] : {std::tuple{384, 64, 7}, {4000, 4096, 33}}) {
      Tensor table = random_host(dt, {V, D}, 1.0f, rng);
      std::vector<int32_t> ids(static_cast<size_t>(T));
      for (auto& id : ids) id = int32_t(rng() % uint32_t(V));
      Tensor hid = host_i32(ids, {T}), want = Tensor::empty(DType::F32, {T, D});
      reference().embedding(table, hid, 1.0f, want);
      Tensor out = poisoned(*be, {T, D});
      be->embedding(be->upload(table), be->upload(hid), 1.0f, out);
      expect_close("embedding", fmt("%s V%d D%d", dname(dt).c_str(), V, D),
                   to_host_f32(*be, out), host_values(want), 0.0);
    }
}

TEST(CudaOps, RmsNorm) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(2);
  for (DType dt : kWeightTypes)
    for (auto [T, D, offset, in_place] :
         {std::tuple{1, 64, 0.0f, false}, {17, 4096, 0.0f, false}, {5, 5120, 1.0f, false}, {24, 128, 0.0f, true}}) {
      Tensor x = random_host(DType::F32, {T, D}, 3.0f, rng), w = random_host(dt, {D}, 1.0f, rng);
      Tensor want = Tensor::empty(DType::F32, {T, D});
      reference().rms_norm(x, w, 1e-6f, offset, want);
      Tensor gx = be->upload(x), out = in_place ? gx : poisoned(*be, {T, D});
      be->rms_norm(gx, be->upload(w), 1e-6f, offset, out);
      expect_close("rms_norm", fmt("%s T%d D%d%s%s", dname(dt).c_str(), T, D, offset ? " offset1" : "",
                                   in_place ? " in-place" : ""),
                   to_host_f32(*be, out), host_values(want), 1e-11);
    }
}

TEST(CudaOps, Linear) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(3);
  for (DType dt : kWeightTypes)
    for (auto [T, K, N, bias] : {std::tuple{1, 64, 384, false}, {7, 4096, 1024, false}, {33, 256, 4096, true},
                                 {128, 1024, 1000, false}, {3, 100, 30, true},
                                 {8, 512, 300, true}, {2, 14336, 64, false}, {4, 1024, 33, false}}) {
      Tensor x = random_host(DType::F32, {T, K}, 1.0f, rng);
      Tensor w = random_host(dt, {N, K}, 1.0f / std::sqrt(float(K)), rng);
      Tensor b = bias ? random_host(dt, {N}, 1.0f, rng) : Tensor();
      Tensor want = Tensor::empty(DType::F32, {T, N});
      reference().linear(x, w, b, want);
      Tensor out = poisoned(*be, {T, N});
      be->linear(be->upload(x), be->upload(w), bias ? be->upload(b) : Tensor(), out);
      expect_close("linear", fmt("%s T%d K%d N%d%s", dname(dt).c_str(), T, K, N, bias ? " bias" : ""),
                   to_host_f32(*be, out), host_values(want), limit_for(dt));
    }
}

// Products recorded behind the kernels that write their input, as a decode step records them:
// each replay, its input uploaded anew before it, must give the product of that input, not of
// the one before (which cuBLASLt's kernels read when recorded as programmatic dependents of
// the kernel before them: bench/RESULTS.md, 2026-12-02).
TEST(CudaOps, RecordedLinear) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(29);
  for (DType dt : kWeightTypes)
    for (auto [T, K, N] : {std::tuple{32, 1024, 3072}, {64, 2048, 1024}, {24, 512, 4096}, {128, 1024, 1024}}) {
      Tensor w = random_host(dt, {N, K}, 1.0f / std::sqrt(float(K)), rng);
      Tensor norm = random_host(DType::F32, {K}, 1.0f, rng);
      Tensor gw = be->upload(w), gnorm = be->upload(norm), gx = be->empty(DType::F32, {T, K});
      Tensor h = be->empty(DType::F32, {T, K}), out = be->empty(DType::F32, {T, N});
      auto step = [&] {
        be->rms_norm(gx, gnorm, 1e-6f, 0.0f, h);
        be->linear(h, gw, Tensor(), out);
      };
      // Once eagerly first (the product's plan is made then, as in a batch size's first step).
      be->upload_to(random_host(DType::F32, {T, K}, 1.0f, rng), gx);
      step();
      std::unique_ptr<Recording> recording = be->record(step);
      ASSERT_TRUE(recording);
      for (int r = 0; r < 2; ++r) {
        Tensor x = random_host(DType::F32, {T, K}, 1.0f, rng);
        Tensor hx = Tensor::empty(DType::F32, {T, K}), want = Tensor::empty(DType::F32, {T, N});
        reference().rms_norm(x, norm, 1e-6f, 0.0f, hx);
        reference().linear(hx, w, Tensor(), want);
        be->upload_to(x, gx);
        be->replay(*recording);
        expect_close("recorded linear", fmt("%s T%d K%d N%d replay %d", dname(dt).c_str(), T, K, N, r),
                     to_host_f32(*be, out), host_values(want), limit_for(dt));
      }
    }
}

// q/k/v- and gate/up-shaped groups, uploaded apart or stacked (upload_group), through the
// one-launch GEMV (1-2 tokens), the skinny product (3-16 tokens on Hopper), the stacked
// product + column scatter and the per-part products (more tokens), against the reference's
// linear per part.
TEST(CudaOps, LinearGroup) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(13);
  for (DType dt : kWeightTypes)
    for (auto [T, K, bias] : {std::tuple{1, 512, false}, {2, 1024, true}, {3, 512, true}, {9, 256, false},
                              {16, 1024, false}, {64, 512, true}, {64, 100, false}, {600, 256, false}})
      for (bool stacked : {false, true}) {
        const std::vector<int> rows = {K, K / 4, K / 4 + 8};
        std::vector<Tensor> w, b, want, out, gb;
        Tensor x = random_host(DType::F32, {T, K}, 1.0f, rng);
        for (int n : rows) {
          w.push_back(random_host(dt, {n, K}, 1.0f / std::sqrt(float(K)), rng));
          b.push_back(bias ? random_host(dt, {n}, 1.0f, rng) : Tensor());
          want.push_back(Tensor::empty(DType::F32, {T, n}));
          reference().linear(x, w.back(), b.back(), want.back());
          out.push_back(poisoned(*be, {T, n}));
          gb.push_back(bias ? be->upload(b.back()) : Tensor());
        }
        std::vector<Tensor> gw;
        if (stacked) gw = be->upload_group(w);
        else
          for (const Tensor& t : w) gw.push_back(be->upload(t));
        be->linear_group(be->upload(x), {{gw[0], gb[0], out[0]}, {gw[1], gb[1], out[1]}, {gw[2], gb[2], out[2]}});
        for (size_t i = 0; i < rows.size(); ++i)
          expect_close("linear_group", fmt("%s T%d K%d part %zu%s%s", dname(dt).c_str(), T, K, i, bias ? " bias" : "",
                                           stacked ? " stacked" : ""),
                       to_host_f32(*be, out[i]), host_values(want[i]), limit_for(dt));
      }
}

TEST(CudaOps, AddRmsNorm) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(14);
  for (DType dt : kWeightTypes)
    for (auto [T, D, offset, alias] : {std::tuple{1, 4096, 0.0f, true}, {33, 1000, 1.0f, false}, {7, 64, 0.0f, true}}) {
      Tensor x = random_host(DType::F32, {T, D}, 2.0f, rng), delta = random_host(DType::F32, {T, D}, 1.0f, rng);
      Tensor w = random_host(dt, {D}, 1.0f, rng), want = Tensor::empty(DType::F32, {T, D});
      Tensor gx = be->upload(x), gd = be->upload(delta);
      reference().add_rms_norm(x, delta, w, 1e-6f, offset, want);
      Tensor out = alias ? gd : poisoned(*be, {T, D});
      be->add_rms_norm(gx, gd, be->upload(w), 1e-6f, offset, out);
      std::string name = fmt("%s T%d D%d%s%s", dname(dt).c_str(), T, D, offset ? " offset1" : "",
                             alias ? " out=delta" : "");
      expect_close("add_rms_norm", name, to_host_f32(*be, out), host_values(want), 1e-11);
      expect_close("add_rms_norm", name + " residual", to_host_f32(*be, gx), host_values(x), 1e-14);
    }
}

// The fold at load: w[n][k] * (norm[k] + offset), one f32 product rounded once to w's dtype, so
// the result must equal the host's to the bit. A norm of the wrong width changes nothing.
TEST(CudaOps, FoldNormWeight) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(15);
  for (DType dt : kWeightTypes)
    for (DType norm_dt : {DType::F32, DType::BF16})
      for (auto [N, K, offset] : {std::tuple{3, 64, 0.0f}, {1000, 4096, 1.0f}, {7, 100, 0.0f}}) {
        Tensor w = random_host(dt, {N, K}, 0.05f, rng), norm = random_host(norm_dt, {K}, 1.0f, rng);
        const std::vector<float> w_in = to_host_f32(reference(), w), g = to_host_f32(reference(), norm);
        Tensor want = Tensor::empty(dt, {N, K});
        for (int64_t i = 0; i < N * K; ++i) {
          const float v = w_in[size_t(i)] * (g[size_t(i % K)] + offset);
          if (dt == DType::F32)
            want.data<float>()[i] = v;
          else
            want.data<uint16_t>()[i] = dt == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
        }
        Tensor gw = be->upload(w);
        be->fold_norm_weight(gw, be->upload(norm), offset);
        expect_close("fold_norm",
                     fmt("%s norm %s N%d K%d%s", dname(dt).c_str(), dname(norm_dt).c_str(), N, K,
                         offset ? " offset1" : ""),
                     to_host_f32(*be, gw), to_host_f32(reference(), want), 0.0);
      }
  Tensor gw = be->upload(random_host(DType::BF16, {4, 64}, 1.0f, rng));
  const std::vector<float> before = to_host_f32(*be, gw);
  EXPECT_THROW(be->fold_norm_weight(gw, be->upload(random_host(DType::F32, {32}, 1.0f, rng)), 0.0f), Error);
  EXPECT_EQ(to_host_f32(*be, gw), before);
}

TEST(CudaOps, Rope) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(4);
  for (auto [T, H, Dh, rot, scaling, max_pos] : {std::tuple{9, 4, 16, 16, 1.0f, 64}, {5, 32, 128, 128, 1.0f, 8000},
                                                 {11, 6, 24, 12, 1.25f, 300}, {64, 8, 64, 64, 1.0f, 130000}}) {
    std::vector<float> inv(size_t(rot / 2));
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = 1.0f / std::pow(500000.0f, float(2 * i) / float(rot));
    Tensor hinv = Tensor::empty(DType::F32, {int64_t(inv.size())});
    std::copy(inv.begin(), inv.end(), hinv.data<float>());
    std::vector<int32_t> pos(static_cast<size_t>(T));
    for (auto& p : pos) p = int32_t(rng() % uint32_t(max_pos));
    Tensor x = random_host(DType::F32, {T, H, Dh}, 1.0f, rng), hpos = host_i32(pos, {T});
    Tensor gx = be->upload(x);
    RopeParams hp{hinv, scaling, rot}, gp{be->upload(hinv), scaling, rot};
    reference().rope(x, hpos, hp);
    be->rope(gx, be->upload(hpos), gp);
    // cosf/sinf of large angles differ from libm's by an ulp of the angle's reduction.
    expect_close("rope", fmt("T%d H%d Dh%d rot%d maxpos%d", T, H, Dh, rot, max_pos),
                 to_host_f32(*be, gx), host_values(x), 1e-10);
  }
}

TEST(CudaOps, StoreKv) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(5);
  for (DType cache_dt : {DType::F32, DType::BF16})
    for (auto [T, Hkv, Dh, slots_total] : {std::tuple{7, 2, 16, 64}, {300, 8, 128, 1024}}) {
      std::vector<int32_t> all(static_cast<size_t>(slots_total));
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      std::vector<int32_t> slots(all.begin(), all.begin() + T);
      // Values exact in the cache's format, so a bf16 cache must match exactly too.
      Tensor k = random_host(DType::F32, {T, Hkv, Dh}, 1.0f, rng, cache_dt);
      Tensor v = random_host(DType::F32, {T, Hkv, Dh}, 1.0f, rng, cache_dt);
      Tensor kc0 = random_host(cache_dt, {slots_total, Hkv, Dh}, 1.0f, rng);
      Tensor vc0 = random_host(cache_dt, {slots_total, Hkv, Dh}, 1.0f, rng);
      Tensor gk = be->upload(kc0), gv = be->upload(vc0);
      std::vector<float> kf = to_host_f32(*be, gk), vf = to_host_f32(*be, gv);  // initial caches as f32
      Tensor hk = Tensor::view(kf.data(), DType::F32, kc0.shape(), nullptr);
      Tensor hv = Tensor::view(vf.data(), DType::F32, vc0.shape(), nullptr);
      Tensor hslots = host_i32(slots, {T});
      reference().store_kv(k, v, hslots, hk, hv);
      be->store_kv(be->upload(k), be->upload(v), be->upload(hslots), gk, gv);
      std::string name = fmt("%s T%d Hkv%d", dname(cache_dt).c_str(), T, Hkv);
      expect_close("store_kv k", name, to_host_f32(*be, gk), kf, 0.0);
      expect_close("store_kv v", name, to_host_f32(*be, gv), vf, 0.0);
    }
}

struct AttnCase {
  std::string name;
  std::vector<int> new_tokens, context;  // per sequence
  int H, Hkv, Dh, block_size, window;
  float softcap;
  DType cache;
};

// out_dt: f32, or the 16-bit format of the o product the output feeds (one more rounding).
void run_attention_case(Backend& be, const AttnCase& c, std::mt19937& rng, DType out_dt) {
  const int S = int(c.new_tokens.size()), bs = c.block_size;
  int total_blocks = 3, max_blocks = 1, max_query = 0, max_context = 0;
  for (int s = 0; s < S; ++s) {
    int nb = (c.context[s] + bs - 1) / bs;
    total_blocks += nb;
    max_blocks = std::max(max_blocks, nb);
    max_query = std::max(max_query, c.new_tokens[s]);
    max_context = std::max(max_context, c.context[s]);
  }
  std::vector<int32_t> pool(static_cast<size_t>(total_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<int32_t> tables(size_t(S) * max_blocks, 0), starts{0}, ctx, positions;
  size_t next = 0;
  for (int s = 0; s < S; ++s) {
    for (int b = 0; b < (c.context[s] + bs - 1) / bs; ++b) tables[size_t(s) * max_blocks + b] = pool[next++];
    for (int i = 0; i < c.new_tokens[s]; ++i) positions.push_back(c.context[s] - c.new_tokens[s] + i);
    starts.push_back(int32_t(positions.size()));
    ctx.push_back(c.context[s]);
  }
  const int64_t T = int64_t(positions.size()), slots = int64_t(total_blocks) * bs;
  Tensor q = random_host(DType::F32, {T, c.H, c.Dh}, 1.0f, rng);
  Tensor kc = random_host(c.cache, {slots, c.Hkv, c.Dh}, 1.0f, rng);
  Tensor vc = random_host(c.cache, {slots, c.Hkv, c.Dh}, 1.0f, rng);
  Tensor gk = be.upload(kc), gv = be.upload(vc);
  std::vector<float> kf = to_host_f32(be, gk), vf = to_host_f32(be, gv);
  Tensor hk = Tensor::view(kf.data(), DType::F32, kc.shape(), nullptr);
  Tensor hv = Tensor::view(vf.data(), DType::F32, vc.shape(), nullptr);

  AttentionMeta hm;
  hm.seq_starts = host_i32(starts, {S + 1});
  hm.context_lens = host_i32(ctx, {S});
  hm.block_tables = host_i32(tables, {S, max_blocks});
  hm.positions = host_i32(positions, {T});
  hm.num_seqs = S, hm.max_blocks = max_blocks, hm.block_size = bs;
  hm.max_query_len = max_query, hm.max_context_len = max_context;
  AttentionMeta gm = hm;
  gm.seq_starts = be.upload(hm.seq_starts);
  gm.context_lens = be.upload(hm.context_lens);
  gm.block_tables = be.upload(hm.block_tables);
  gm.positions = be.upload(hm.positions);
  AttentionParams p{1.0f / std::sqrt(float(c.Dh)), c.window, c.softcap};

  Tensor want = Tensor::empty(DType::F32, {T, c.H, c.Dh});
  reference().attention(q, hk, hv, hm, p, want);
  Tensor out = poisoned(be, {T, c.H, c.Dh}, out_dt);
  be.attention(be.upload(q), gk, gv, gm, p, out);
  // bf16 caches take the tensor-core kernel where it applies, which rounds q and the softmax
  // weights to bf16 for its two products. A 16-bit output adds one rounding of each element
  // (relative error up to 2^-8 in bf16, 2^-11 in f16): NMSE up to 3.0e-6 and 4.7e-8 measured on
  // the H200 over these cases with f32 caches; the limits leave a factor of ~3-4.
  double limit = c.cache == DType::BF16 ? 1e-4 : 1e-10;
  if (out_dt != DType::F32) limit = std::max(limit, out_dt == DType::BF16 ? 1e-5 : 2e-7);
  expect_close("attention", fmt("%s %s out %s", c.name.c_str(), dname(c.cache).c_str(), dname(out_dt).c_str()),
               to_host_f32(be, out), host_values(want), limit);
}

// n contexts spread evenly over [lo, hi].
std::vector<int> ragged(int n, int lo, int hi) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(lo + int(int64_t(hi - lo) * i / std::max(1, n - 1)));
  return v;
}

// One new token for each of n sequences but every k-th, which has none this step.
std::vector<int> idle_every(int n, int k) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(i % k == 1 ? 0 : 1);
  return v;
}

TEST(CudaOps, Attention) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(6);
  const AttnCase cases[] = {
      {"prefill 37", {37}, {37}, 4, 2, 16, 16, 0, 0.0f, DType::F32},
      {"mixed decode+chunk+prefill", {1, 5, 20}, {300, 50, 20}, 8, 2, 64, 16, 0, 0.0f, DType::F32},
      {"decode x4 long (split keys)", {1, 1, 1, 1}, {1500, 2048, 700, 257}, 32, 8, 128, 16, 0, 0.0f, DType::F32},
      {"window 16 softcap 30 Dh24", {9, 1}, {40, 77}, 6, 3, 24, 8, 16, 30.0f, DType::F32},
      {"MHA Dh256", {3, 2}, {10, 33}, 4, 4, 256, 32, 0, 0.0f, DType::F32},
      {"prefill 200 GQA8", {200}, {200}, 16, 2, 128, 16, 0, 0.0f, DType::F32},
      {"decode x4 long (split keys)", {1, 1, 1, 1}, {1500, 2048, 700, 257}, 32, 8, 128, 16, 0, 0.0f, DType::BF16},
      {"window 100 decode x2 long", {1, 1}, {1000, 600}, 8, 1, 64, 16, 100, 0.0f, DType::BF16},
      {"prefill 200 GQA8", {200}, {200}, 16, 2, 128, 16, 0, 0.0f, DType::BF16},
      {"mixed decode+chunk+prefill", {1, 5, 20}, {300, 50, 20}, 8, 2, 64, 16, 0, 0.0f, DType::BF16},
      {"window 16 softcap 30 Dh64", {9, 1, 70}, {40, 77, 70}, 8, 2, 64, 8, 16, 30.0f, DType::BF16},
      {"MHA Dh256 multi-tile", {70, 2}, {100, 33}, 4, 4, 256, 32, 0, 0.0f, DType::BF16},
      {"chunk 100 of 1000 GQA4", {100}, {1000}, 32, 8, 128, 16, 0, 0.0f, DType::BF16},
      {"GQA3 (row kernel)", {5, 1}, {300, 20}, 6, 2, 128, 16, 0, 0.0f, DType::BF16},
      {"decode x3 window 20 softcap 50", {1, 1, 1}, {5, 90, 300}, 4, 2, 64, 16, 20, 50.0f, DType::F32},
      {"decode MHA Dh256", {1, 1}, {33, 700}, 4, 4, 256, 16, 0, 0.0f, DType::F32},
      {"decode Dh32 GQA8 first tokens", {1, 1, 1}, {1, 2, 45}, 16, 2, 32, 8, 0, 0.0f, DType::BF16},
      {"decode GQA16 (row kernel)", {1}, {100}, 16, 1, 64, 16, 0, 0.0f, DType::F32},
      // Few blocks: 2-8 key splits merged in a cluster (Hopper): the tensor-core register form's
      // for bf16 caches (a window, a soft cap, 66 tiles in 8 splits among them), the CUDA-core
      // kernel's for f32 caches and head_dim 256.
      {"decode x1 ctx 528 8 splits", {1}, {528}, 32, 8, 128, 16, 0, 0.0f, DType::BF16},
      {"decode x3 cluster window 300", {1, 1, 1}, {1000, 64, 333}, 32, 8, 128, 16, 300, 0.0f, DType::BF16},
      {"decode x2 cluster softcap Dh64", {1, 1}, {700, 65}, 8, 4, 64, 16, 0, 30.0f, DType::BF16},
      {"decode x1 ctx 4200 cluster", {1}, {4200}, 32, 8, 128, 16, 0, 0.0f, DType::BF16},
      {"decode x1 Dh256 (CUDA-core)", {1}, {700}, 8, 4, 256, 16, 0, 0.0f, DType::BF16},
      {"decode x1 ctx 200 4 splits", {1}, {200}, 8, 2, 128, 16, 0, 0.0f, DType::BF16},
      {"decode x1 ctx 1000 8 splits", {1}, {1000}, 32, 8, 128, 16, 0, 0.0f, DType::BF16},
      {"decode x2 Dh256 GQA8 splits", {1, 1}, {300, 129}, 16, 2, 256, 16, 0, 0.0f, DType::F32},
      {"decode x64 ctx 512", std::vector<int>(64, 1), std::vector<int>(64, 512), 32, 8, 128, 16, 0, 0.0f,
       DType::BF16},
      // Tensor-core decode (bf16, >= 64 sequence x kv head blocks): first keys, tile edges, splits.
      {"decode x8 TC 1..2048 keys", std::vector<int>(8, 1), {1, 2, 63, 64, 65, 700, 1500, 2048}, 32, 8, 128, 16, 0,
       0.0f, DType::BF16},
      {"decode x32 TC window 50 softcap 30 Dh256", std::vector<int>(32, 1),
       {1, 9, 17, 33, 49, 50, 51, 65, 81, 97, 113, 129, 145, 161, 177, 193, 209, 225, 241, 257, 273, 289, 305,
        321, 337, 353, 369, 385, 401, 417, 433, 449},
       4, 2, 256, 16, 50, 30.0f, DType::BF16},
      {"decode x16 TC GQA16 Dh64", std::vector<int>(16, 1),
       {3, 40, 77, 114, 151, 188, 225, 262, 299, 336, 373, 410, 447, 484, 521, 900}, 64, 4, 64, 8, 0, 0.0f,
       DType::BF16},
      // Tensor-core decode over many one-to-three-tile sequences, and with sequences that have no
      // token this step.
      {"decode x200 TC short", std::vector<int>(200, 1), ragged(200, 1, 150), 8, 2, 64, 16, 0, 0.0f, DType::BF16},
      {"decode x70 TC idle sequences", idle_every(70, 3), ragged(70, 100, 1300), 32, 8, 128, 16, 0, 0.0f,
       DType::BF16},
      // Tensor-core tile loads over pages that are not a power of two, or smaller than the keys a
      // pass of the block's threads covers (4 at Dh 256, 8 at 128).
      {"decode x16 TC block size 12", std::vector<int>(16, 1), ragged(16, 1, 900), 32, 8, 128, 12, 0, 0.0f,
       DType::BF16},
      {"decode x32 TC Dh256 block size 3", std::vector<int>(32, 1), ragged(32, 1, 300), 4, 2, 256, 3, 0, 0.0f,
       DType::BF16},
      {"prefill 150 block size 12", {150}, {150}, 16, 2, 128, 12, 0, 0.0f, DType::BF16},
      // The register form of the tensor-core decode (head_dim 64 / 128, up to 8 heads a group):
      // every group size's head columns, window and softcap, pages of 5 keys.
      {"decode x32 TC GQA8 window 50 softcap 30", std::vector<int>(32, 1), ragged(32, 1, 449), 16, 2, 128, 16, 50,
       30.0f, DType::BF16},
      {"decode x64 TC MHA Dh64 block size 5", std::vector<int>(64, 1), ragged(64, 1, 400), 2, 2, 64, 5, 0, 0.0f,
       DType::BF16},
      {"decode x40 TC GQA3", idle_every(40, 7), ragged(40, 60, 700), 6, 2, 128, 16, 0, 0.0f, DType::BF16},
      // ... its dense form (4 blocks an SM, no key splits) where 3-4 blocks an SM make one wave
      // (on the H200's 132 SMs: 397-528 sequence x kv head blocks), ragged, window and softcap.
      {"decode x60 TC dense window 300 softcap 30", idle_every(60, 9), ragged(60, 1, 1000), 32, 8, 128, 16, 300,
       30.0f, DType::BF16},
      // ... and the shared-memory form where the register form does not apply (16 heads a group).
      {"decode x8 TC GQA16 Dh128", std::vector<int>(8, 1), ragged(8, 1, 700), 128, 8, 128, 16, 0, 0.0f, DType::BF16},
  };
  // Every case with an f32 output and with the bf16 one the o product takes; f16 on f32 caches.
  for (const AttnCase& c : cases) {
    run_attention_case(*be, c, rng, DType::F32);
    run_attention_case(*be, c, rng, DType::BF16);
    if (c.cache == DType::F32) run_attention_case(*be, c, rng, DType::F16);
  }
}

TEST(CudaOps, Elementwise) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(7);
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(33) * 14336}) {
    Tensor a = random_host(DType::F32, {n}, 4.0f, rng), b = random_host(DType::F32, {n}, 1.0f, rng);
    Tensor want = Tensor::empty(DType::F32, {n});
    Tensor out = poisoned(*be, {n});
    // GeGLU: the reference's 0.5 g (1 + tanh(z)) cancels where z is well below 0 (as PyTorch's does);
    // the kernels' g sigmoid(2 z) does not. Measured on the H200: NMSE 9e-12 on one such element.
    for (Glu act : {Glu::SwiGLU, Glu::GeGLU}) {
      reference().glu(act, a, b, want);
      be->glu(act, be->upload(a), be->upload(b), out);
      expect_close(act == Glu::SwiGLU ? "swiglu" : "geglu", fmt("n%lld", (long long)n), to_host_f32(*be, out),
                   host_values(want), act == Glu::SwiGLU ? 1e-11 : 1e-10);
    }

    reference().add(a, b, want);
    Tensor ga = be->upload(a);
    be->add(ga, be->upload(b), ga);  // out aliases a, as the decoder's residual adds do
    expect_close("add", fmt("n%lld in-place", (long long)n), to_host_f32(*be, ga), host_values(want), 0.0);
  }
}

TEST(CudaOps, GatherRows) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(8);
  for (auto [R, D, n] : {std::tuple{1, 64, 10}, {7, 4096, 300}, {64, 4096, 64}}) {
    Tensor x = random_host(DType::F32, {n, D}, 1.0f, rng);
    std::vector<int32_t> rows(static_cast<size_t>(R));
    for (auto& r : rows) r = int32_t(rng() % uint32_t(n));
    Tensor hr = host_i32(rows, {R}), want = Tensor::empty(DType::F32, {R, D});
    reference().gather_rows(x, hr, want);
    Tensor out = poisoned(*be, {R, D});
    be->gather_rows(be->upload(x), be->upload(hr), out);
    expect_close("gather_rows", fmt("R%d D%d", R, D), to_host_f32(*be, out),
                 host_values(want), 0.0);
  }
}

// copy and download_async keep the order of the stream: a copy reads what the kernel before it
// wrote, and a download enqueued behind it has its values once wait_downloads returns.
TEST(CudaOps, CopyAndDownloadAsync) {
  TESSERA_REQUIRE_CUDA(be);
  std::mt19937 rng(9);
  for (int64_t n : {1, 7, 4096, 1 << 20}) {
    Tensor x = random_host(DType::F32, {n}, 1.0f, rng), y = random_host(DType::F32, {n}, 1.0f, rng);
    Tensor want = Tensor::empty(DType::F32, {n});
    reference().add(x, y, want);
    Tensor sum = poisoned(*be, {n}), copied = poisoned(*be, {n});
    be->add(be->upload(x), be->upload(y), sum);
    be->copy(sum, copied);
    Tensor host = be->host_empty(DType::F32, {n});
    std::fill_n(host.data<float>(), n, std::nanf(""));
    be->download_async(copied, host.raw());
    be->wait_downloads();
    std::vector<float> got(host.data<float>(), host.data<float>() + n);
    expect_close("copy + download_async", fmt("n%lld", (long long)n), got, host_values(want), 0.0);
  }
  Tensor a = be->empty(DType::I32, {4}), b = be->empty(DType::F32, {2});
  EXPECT_THROW(be->copy(a, b), Error);
}

}  // namespace
}  // namespace tessera
