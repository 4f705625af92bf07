#include "op_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <tuple>

#include "core/dtype.h"
#include "core/quantization.h"

namespace tessera::test {
namespace {

// NMSE limits. Both backends get bit-identical inputs (16-bit weights widen to f32 exactly and
// every path accumulates in f32), so results differ only by rounding order:
// - copies and single roundings (embedding, gather_rows, store_kv to any cache dtype, add) must be
//   exact;
constexpr double kExact = 0;
// - pointwise ops whose exp/sin/cos/tanh may be vectorised approximations of a few ulp:
//   relative error < 1e-6 per element, so NMSE < 1e-12;
constexpr double kPointwise = 1e-12;
// - reductions (dot products, sums of squares, softmax sums) of up to K = 4096 f32 terms summed in
//   another order: relative error ~ eps * sqrt(K) = 6e-8 * 64 ~ 4e-6, squared ~ 1.5e-11; the limit
//   leaves a factor of ~7 on that, and a one-bit error in a 16-bit weight conversion (2^-8 relative)
//   or an element summed twice or missed still lands far above it.
constexpr double kReduction = 1e-10;
// - any of the above with a 16-bit output (activations a backend keeps in the weights' format):
//   both sides round once, so they differ only where the f32 results straddle a rounding
//   boundary, by one unit (bf16: 2^-8 to 2^-7 relative, f16: 2^-11 to 2^-10). bf16: NMSE ~ 1.5e-5
//   x the fraction that straddles (~ 4e-6 / 2^-8 = 1e-3), about 1.5e-8; f16: ~ 2.4e-7 x 1e-2,
//   about 3e-9. Rounding by truncation instead of to nearest moves half of all elements by a
//   unit (bf16 NMSE > 2e-6, f16 > 1e-7), and fails.
double rounded16(DType out) { return out == DType::BF16 ? 1e-6 : 3e-8; }

using Outputs = std::vector<std::vector<float>>;

struct Rng {
  std::mt19937_64 gen;
  explicit Rng(uint64_t seed) : gen(seed) {}
  float normal(float sd = 1) { return std::normal_distribution<float>(0, sd)(gen); }
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); }
};

// Host tensor of N(0, sd) values, rounded to `dt`.
Tensor random_tensor(DType dt, Shape shape, Rng& rng, float sd = 1, float mean = 0) {
  Tensor t = Tensor::empty(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = mean + rng.normal(sd);
    if (dt == DType::F32) t.data<float>()[i] = v;
    else if (dt == DType::BF16) t.data<uint16_t>()[i] = f32_to_bf16(v);
    else t.data<uint16_t>()[i] = f32_to_f16(v);
  }
  return t;
}

Tensor i32_tensor(const std::vector<int32_t>& v, Shape shape = {}) {
  if (shape.empty()) shape = {int64_t(v.size())};
  Tensor t = Tensor::empty(DType::I32, std::move(shape));
  std::memcpy(t.raw(), v.data(), v.size() * 4);
  return t;
}

// A fresh copy on `be`, placed one element past a 64-byte boundary on the host: mmapped
// safetensors data carries no alignment beyond the element size, so fast paths must not need it.
Tensor upload(Backend& be, const Tensor& host) {
  size_t pad = dtype_size(host.dtype());
  auto buf = std::shared_ptr<void>(std::aligned_alloc(64, (host.nbytes() + pad + 63) / 64 * 64), std::free);
  void* p = static_cast<char*>(buf.get()) + pad;
  std::memcpy(p, host.raw(), host.nbytes());
  return be.upload(Tensor::view(p, host.dtype(), host.shape(), buf));
}

// An output on `be` filled with NaN, so that any element the op fails to write is caught.
Tensor poisoned(Backend& be, Shape shape, DType dt = DType::F32) {
  Tensor h = Tensor::empty(dt, std::move(shape));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < h.numel(); ++i) {
    if (dt == DType::F32) h.data<float>()[i] = nan;
    else h.data<uint16_t>()[i] = dt == DType::BF16 ? f32_to_bf16(nan) : f32_to_f16(nan);
  }
  return be.upload(h);
}

std::vector<float> download(Backend& be, const Tensor& t) {
  std::vector<float> v(size_t(t.numel()));
  be.download(t, v.data());
  return v;
}

// A tensor of any float dtype downloaded and widened to f32.
std::vector<float> widened(Backend& be, const Tensor& t) {
  if (t.dtype() == DType::F32) return download(be, t);
  std::vector<uint16_t> raw(size_t(t.numel()));
  be.download(t, raw.data());
  std::vector<float> v(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) v[i] = t.dtype() == DType::BF16 ? bf16_to_f32(raw[i]) : f16_to_f32(raw[i]);
  return v;
}

std::string dname(DType dt) { return std::string(dtype_name(dt)); }

// ---- cases, one builder per op ----

// x_dt, out_dt: f32, or the weights' 16-bit dtype (activations kept in it, see backend.h).
OpCase linear_case(DType dt, int T, int K, int N, bool bias, uint64_t seed, DType x_dt = DType::F32,
                   DType out_dt = DType::F32) {
  Rng rng(seed);
  Tensor x = random_tensor(x_dt, {T, K}, rng);
  Tensor w = random_tensor(dt, {N, K}, rng, 1.0f / std::sqrt(float(K)));
  Tensor b = bias ? random_tensor(dt, {N}, rng) : Tensor();
  std::string name = "linear " + dname(dt) + " T=" + std::to_string(T) + " K=" + std::to_string(K) +
                     " N=" + std::to_string(N) + (bias ? " bias" : "") +
                     (x_dt != DType::F32 ? " x " + dname(x_dt) : "") + (out_dt != DType::F32 ? " out " + dname(out_dt) : "");
  return {name, "linear", dt, out_dt == DType::F32 ? kReduction : rounded16(out_dt), [=](Backend& be) {
            Tensor xd = upload(be, x), wd = upload(be, w), bd = bias ? upload(be, b) : Tensor();
            Tensor out = poisoned(be, {T, N}, out_dt);
            be.linear(xd, wd, bd, out);
            return Outputs{widened(be, out)};
          }};
}

// A quantized weight's parts on the host (core/quantization.h): random codes, and scales and
// biases in `scale_dt` that spread each group's values over about N(0, sd).
struct QuantizedHost {
  Shape shape;
  int bits, group_size;
  Tensor codes, scales, biases;
};
QuantizedHost random_quantized(Shape shape, int bits, int group_size, DType scale_dt, Rng& rng, float sd) {
  QuantizedHost q;
  q.shape = shape, q.bits = bits, q.group_size = group_size;
  const int64_t n = shape_numel(shape), levels = (int64_t(1) << bits) - 1;
  q.codes = Tensor::empty(DType::U32, {n * bits / 32});
  for (int64_t i = 0; i < q.codes.numel(); ++i) q.codes.data<uint32_t>()[i] = uint32_t(rng.gen());
  Shape groups = shape;
  groups.back() /= group_size;
  q.scales = random_tensor(scale_dt, groups, rng, sd / float(levels), 3.4f * sd / float(levels));
  q.biases = random_tensor(scale_dt, groups, rng, 0.1f * sd, -1.7f * sd);
  return q;
}
// The weight on `be`: its codes one word past a 64-byte boundary (see upload below).
Tensor upload(Backend& be, const QuantizedHost& q) {
  return Tensor::quantized(upload(be, q.codes), q.shape,
                           {q.bits, q.group_size, upload(be, q.scales), upload(be, q.biases)});
}
std::string quantized_name(const QuantizedHost& q) {
  return "q" + std::to_string(q.bits) + "/" + std::to_string(q.group_size) + " " + dname(q.scales.dtype());
}

// linear with a quantized weight. The case's dtype is U32 (the codes'): backends that do not hold
// quantized weights skip it.
OpCase quantized_linear_case(int bits, int group_size, DType scale_dt, int T, int K, int N, bool bias,
                             uint64_t seed) {
  Rng rng(seed);
  Tensor x = random_tensor(DType::F32, {T, K}, rng);
  const QuantizedHost w =
      random_quantized({N, K}, bits, group_size, scale_dt, rng, 1.0f / std::sqrt(float(K)));
  Tensor b = bias ? random_tensor(scale_dt, {N}, rng) : Tensor();
  std::string name = "linear " + quantized_name(w) + " T=" + std::to_string(T) + " K=" + std::to_string(K) +
                     " N=" + std::to_string(N) + (bias ? " bias" : "");
  return {name,
          "linear",
          DType::U32,
          kReduction,
          [=](Backend& be) {
            Tensor xd = upload(be, x), wd = upload(be, w), bd = bias ? upload(be, b) : Tensor();
            Tensor out = poisoned(be, {T, N});
            be.linear(xd, wd, bd, out);
            return Outputs{download(be, out)};
          },
          scale_dt};
}

struct AttnShape {
  std::vector<int> q_lens, ctx_lens;  // per sequence: new tokens, tokens in cache after the step
  int H, Hkv, Dh, block_size;
  int window = 0;
  float softcap = 0;
};

// out_dt: f32, or the 16-bit format of the o product the output feeds.
OpCase attention_case(const AttnShape& s, DType cache, uint64_t seed, DType out_dt = DType::F32) {
  Rng rng(seed);
  int S = int(s.q_lens.size()), T = std::accumulate(s.q_lens.begin(), s.q_lens.end(), 0);
  int max_blocks = 0, used_blocks = 0, max_q = 0, max_ctx = 0;
  for (int i = 0; i < S; ++i) {
    int nb = (s.ctx_lens[i] + s.block_size - 1) / s.block_size;
    max_blocks = std::max(max_blocks, nb);
    used_blocks += nb;
    max_q = std::max(max_q, s.q_lens[i]);
    max_ctx = std::max(max_ctx, s.ctx_lens[i]);
  }
  // Blocks handed out in a shuffled order, with spares, so tables are not contiguous.
  int num_blocks = used_blocks + 3;
  std::vector<int32_t> perm(num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng.gen);
  std::vector<int32_t> starts{0}, tables(size_t(S) * max_blocks, 0), positions;
  int next = 0;
  for (int i = 0; i < S; ++i) {
    starts.push_back(starts.back() + s.q_lens[i]);
    for (int b = 0; b < (s.ctx_lens[i] + s.block_size - 1) / s.block_size; ++b) tables[i * max_blocks + b] = perm[next++];
    for (int j = 0; j < s.q_lens[i]; ++j) positions.push_back(s.ctx_lens[i] - s.q_lens[i] + j);
  }
  Tensor q = random_tensor(DType::F32, {T, s.H, s.Dh}, rng);
  Tensor kc = random_tensor(cache, {int64_t(num_blocks) * s.block_size, s.Hkv, s.Dh}, rng);
  Tensor vc = random_tensor(cache, {int64_t(num_blocks) * s.block_size, s.Hkv, s.Dh}, rng);
  Tensor t_starts = i32_tensor(starts), t_ctx = i32_tensor({s.ctx_lens.begin(), s.ctx_lens.end()});
  Tensor t_tables = i32_tensor(tables, {S, max_blocks}), t_pos = i32_tensor(positions);
  AttentionParams p{.scale = 1.0f / std::sqrt(float(s.Dh)), .sliding_window = s.window, .softcap = s.softcap};
  std::string name = "attention " + dname(cache) + " S=" + std::to_string(S) + " T=" + std::to_string(T) + " ctx<=" +
                     std::to_string(max_ctx) + " H=" + std::to_string(s.H) + " Hkv=" + std::to_string(s.Hkv) +
                     " Dh=" + std::to_string(s.Dh) + " bs=" + std::to_string(s.block_size) +
                     (s.window ? " window=" + std::to_string(s.window) : "") +
                     (s.softcap > 0 ? " softcap" : "") + (out_dt != DType::F32 ? " out " + dname(out_dt) : "");
  return {name, "attention", cache, out_dt == DType::F32 ? kReduction : rounded16(out_dt), [=](Backend& be) {
            AttentionMeta m{.seq_starts = upload(be, t_starts), .context_lens = upload(be, t_ctx),
                            .block_tables = upload(be, t_tables), .positions = upload(be, t_pos),
                            .num_seqs = S, .max_blocks = max_blocks, .block_size = s.block_size,
                            .max_query_len = max_q, .max_context_len = max_ctx};
            Tensor out = poisoned(be, {T, s.H, s.Dh}, out_dt);
            be.attention(upload(be, q), upload(be, kc), upload(be, vc), m, p, out);
            return Outputs{widened(be, out)};
          }};
}

OpCase rms_norm_case(DType dt, int T, int D, float offset, uint64_t seed, DType out_dt = DType::F32) {
  Rng rng(seed);
  Tensor x = random_tensor(DType::F32, {T, D}, rng, 3);
  Tensor w = random_tensor(dt, {D}, rng, 0.2f, offset > 0 ? 0.0f : 1.0f);
  std::string name = "rms_norm " + dname(dt) + " T=" + std::to_string(T) + " D=" + std::to_string(D) +
                     " offset=" + std::to_string(int(offset)) + (out_dt != DType::F32 ? " out " + dname(out_dt) : "");
  return {name, "rms_norm", dt, out_dt == DType::F32 ? kReduction : rounded16(out_dt), [=](Backend& be) {
            Tensor out = poisoned(be, {T, D}, out_dt);
            be.rms_norm(upload(be, x), upload(be, w), 1e-6f, offset, out);
            return Outputs{widened(be, out)};
          }};
}

// The residual add and the next norm; out may be the delta (in place) or 16-bit.
OpCase add_rms_norm_case(DType dt, int T, int D, float offset, bool out_is_delta, uint64_t seed,
                         DType out_dt = DType::F32) {
  Rng rng(seed);
  Tensor x = random_tensor(DType::F32, {T, D}, rng, 2), delta = random_tensor(DType::F32, {T, D}, rng);
  Tensor w = random_tensor(dt, {D}, rng, 0.2f, offset > 0 ? 0.0f : 1.0f);
  std::string name = "add_rms_norm " + dname(dt) + " T=" + std::to_string(T) + " D=" + std::to_string(D) +
                     " offset=" + std::to_string(int(offset)) + (out_is_delta ? " out=delta" : "") +
                     (out_dt != DType::F32 ? " out " + dname(out_dt) : "");
  return {name, "add_rms_norm", dt, out_dt == DType::F32 ? kReduction : rounded16(out_dt), [=](Backend& be) {
            Tensor xd = upload(be, x), dd = upload(be, delta);
            Tensor out = out_is_delta ? dd : poisoned(be, {T, D}, out_dt);
            be.add_rms_norm(xd, dd, upload(be, w), 1e-6f, offset, out);
            return Outputs{widened(be, out), download(be, xd)};
          }};
}

// A sublayer's output product added into the residual stream, then the next norm (the decoder's
// o and down): a [T, K] f32 or of the weights' dtype (the decoder's from 3 tokens), out of a's
// dtype (the next product's input) or the f32 scratch itself (the decoder on the CPU).
OpCase linear_add_rms_norm_case(DType dt, DType a_dt, int T, int K, int N, bool bias, bool out_is_scratch,
                                uint64_t seed) {
  Rng rng(seed);
  Tensor a = random_tensor(a_dt, {T, K}, rng);
  Tensor w = random_tensor(dt, {N, K}, rng, 1.0f / std::sqrt(float(K)));
  Tensor b = bias ? random_tensor(dt, {N}, rng) : Tensor();
  Tensor x = random_tensor(DType::F32, {T, N}, rng, 2), g = random_tensor(dt, {N}, rng, 0.2f, 1.0f);
  const DType out_dt = out_is_scratch ? DType::F32 : a_dt;
  std::string name = "linear_add_rms_norm " + dname(dt) + " T=" + std::to_string(T) + " K=" + std::to_string(K) +
                     " N=" + std::to_string(N) + (bias ? " bias" : "") +
                     (a_dt != DType::F32 ? " a " + dname(a_dt) : "") + (out_is_scratch ? " out=scratch" : "");
  return {name, "linear_add_rms_norm", dt, out_dt == DType::F32 ? kReduction : rounded16(out_dt), [=](Backend& be) {
            Tensor xd = upload(be, x), wd = upload(be, w), bd = bias ? upload(be, b) : Tensor();
            Tensor scratch = poisoned(be, {T, N});
            Tensor out = out_is_scratch ? scratch : poisoned(be, {T, N}, out_dt);
            be.linear_add_rms_norm(upload(be, a), {wd, bd, scratch}, xd, upload(be, g), 1e-6f, 0.0f, out);
            return Outputs{widened(be, out), download(be, xd)};
          }};
}

// A sublayer's output product added into the residual stream, with no norm after it (the
// decoder where the products normalise their own input: Backend::normalises_inputs).
OpCase linear_add_case(DType dt, int T, int K, int N, bool bias, uint64_t seed) {
  Rng rng(seed);
  Tensor a = random_tensor(DType::F32, {T, K}, rng);
  Tensor w = random_tensor(dt, {N, K}, rng, 1.0f / std::sqrt(float(K)));
  Tensor b = bias ? random_tensor(dt, {N}, rng) : Tensor();
  Tensor x = random_tensor(DType::F32, {T, N}, rng, 2);
  std::string name = "linear_add " + dname(dt) + " T=" + std::to_string(T) + " K=" + std::to_string(K) +
                     " N=" + std::to_string(N) + (bias ? " bias" : "");
  return {name, "linear_add", dt, kReduction, [=](Backend& be) {
            Tensor xd = upload(be, x), wd = upload(be, w), bd = bias ? upload(be, b) : Tensor();
            Tensor scratch = poisoned(be, {T, N});
            be.linear_add(upload(be, a), {wd, bd, scratch}, xd);
            return Outputs{download(be, xd)};
          }};
}

// The unit weight of a folded norm (Backend::UnitNorm): 1 - offset everywhere.
Tensor unit_norm(int n, float offset) {
  Tensor u = Tensor::empty(DType::F32, {n});
  std::fill_n(u.data<float>(), n, 1.0f - offset);
  return u;
}

OpCase rope_case(int T, int H, int Dh, int rotary_dim, float scaling, int max_pos, uint64_t seed) {
  Rng rng(seed);
  Tensor x = random_tensor(DType::F32, {T, H, Dh}, rng);
  std::vector<int32_t> pos(T);
  for (auto& v : pos) v = rng.uniform(0, max_pos);
  Tensor t_pos = i32_tensor(pos);
  Tensor inv_freq = Tensor::empty(DType::F32, {rotary_dim / 2});
  for (int i = 0; i < rotary_dim / 2; ++i) inv_freq.data<float>()[i] = std::pow(500000.0f, -2.0f * i / rotary_dim);
  std::string name = "rope T=" + std::to_string(T) + " H=" + std::to_string(H) + " Dh=" + std::to_string(Dh) +
                     " rotary=" + std::to_string(rotary_dim) + " pos<=" + std::to_string(max_pos);
  return {name, "rope", DType::F32, kPointwise, [=](Backend& be) {
            Tensor xd = upload(be, x);
            be.rope(xd, upload(be, t_pos), RopeParams{upload(be, inv_freq), scaling, rotary_dim});
            return Outputs{download(be, xd)};
          }};
}

OpCase store_kv_case(DType cache, int T, int Hkv, int Dh, int rows, uint64_t seed) {
  Rng rng(seed);
  Tensor k = random_tensor(DType::F32, {T, Hkv, Dh}, rng), v = random_tensor(DType::F32, {T, Hkv, Dh}, rng);
  Tensor kc = random_tensor(cache, {rows, Hkv, Dh}, rng), vc = random_tensor(cache, {rows, Hkv, Dh}, rng);
  // Some values exactly halfway between two of the cache's values: round to nearest even, not up.
  for (int64_t i = 0; i < k.numel(); i += 7) {
    float& x = k.data<float>()[i];
    uint32_t bits;
    if (cache == DType::BF16) bits = (uint32_t(f32_to_bf16(x)) << 16) | 0x8000;
    else {
      float h = f16_to_f32(f32_to_f16(x));
      std::memcpy(&bits, &h, 4);
      bits |= 0x1000;
    }
    if (cache != DType::F32) std::memcpy(&x, &bits, 4);
  }
  std::vector<int32_t> slots(rows);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng.gen);
  slots.resize(T);
  if (T > 1) slots[T / 2] = -1;  // a padding token: not stored
  Tensor t_slots = i32_tensor(slots);
  std::string name = "store_kv " + dname(cache) + " T=" + std::to_string(T) + " Hkv=" + std::to_string(Hkv) + " Dh=" + std::to_string(Dh);
  // The caches start random (not NaN): a row left unwritten keeps a value that differs from the reference.
  return {name, "store_kv", cache, kExact, [=](Backend& be) {
            Tensor kd = upload(be, kc), vd = upload(be, vc);
            be.store_kv(upload(be, k), upload(be, v), upload(be, t_slots), kd, vd);
            return Outputs{widened(be, kd), widened(be, vd)};
          }};
}

// T tokens' random positions, distinct cache slots among `rows` (one a padding token's -1: rotated,
// not stored) and llama's rope frequencies over rotary_dim.
struct RopeInputs {
  Tensor positions, slots, inv_freq;
};
RopeInputs rope_inputs(int T, int rows, int rotary_dim, Rng& rng) {
  std::vector<int32_t> pos(T), slots(rows);
  for (auto& p : pos) p = rng.uniform(0, 9000);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng.gen);
  slots.resize(T);
  if (T > 1) slots[T / 2] = -1;
  Tensor inv_freq = Tensor::empty(DType::F32, {rotary_dim / 2});
  for (int i = 0; i < rotary_dim / 2; ++i) inv_freq.data<float>()[i] = std::pow(500000.0f, -2.0f * i / rotary_dim);
  return {i32_tensor(pos), i32_tensor(slots), inv_freq};
}

// The per-head q/k norm a case applies before rope: none, Qwen3's (weights about 1) or Gemma 3's
// (weights about 0, offset 1).
enum class HeadNorm { None, Plain, Offset };

struct HeadNormInputs {
  HeadNorm kind = HeadNorm::None;
  Tensor q, k;  // [Dh] of the weights' dtype
  std::string name() const {
    return kind == HeadNorm::None ? "" : kind == HeadNorm::Plain ? " qk_norm" : " qk_norm+1";
  }
};

HeadNormInputs head_norm_inputs(HeadNorm kind, DType dt, int Dh, Rng& rng) {
  if (kind == HeadNorm::None) return {};
  const float mean = kind == HeadNorm::Plain ? 1.0f : 0.0f;
  return {kind, random_tensor(dt, {Dh}, rng, 0.3f, mean), random_tensor(dt, {Dh}, rng, 0.3f, mean)};
}

// Runs f(const QkNorm*) with the norms uploaded (nullptr for none).
template <class F>
auto with_head_norm(Backend& be, const HeadNormInputs& n, F&& f) {
  if (n.kind == HeadNorm::None) return f(nullptr);
  const Tensor q = upload(be, n.q), k = upload(be, n.k);
  const QkNorm norm{q, k, 1e-6f, n.kind == HeadNorm::Offset ? 1.0f : 0.0f};
  return f(&norm);
}

// rope of q and k (each head normalised first where the case says), then k and v into shuffled
// cache rows (partial rotary included); the caches start random, so a row left unwritten
// differs from the reference.
OpCase rope_store_kv_case(DType cache, int T, int H, int Hkv, int Dh, int rotary_dim, uint64_t seed,
                          HeadNorm norm = HeadNorm::None) {
  Rng rng(seed);
  const int rows = T + 9;
  Tensor q = random_tensor(DType::F32, {T, H, Dh}, rng), k = random_tensor(DType::F32, {T, Hkv, Dh}, rng);
  Tensor v = random_tensor(DType::F32, {T, Hkv, Dh}, rng);
  Tensor kc = random_tensor(cache, {rows, Hkv, Dh}, rng), vc = random_tensor(cache, {rows, Hkv, Dh}, rng);
  const RopeInputs in = rope_inputs(T, rows, rotary_dim, rng);
  const HeadNormInputs hn = head_norm_inputs(norm, cache, Dh, rng);
  std::string name = "rope_store_kv " + dname(cache) + " T=" + std::to_string(T) + " H=" + std::to_string(H) +
                     " Hkv=" + std::to_string(Hkv) + " Dh=" + std::to_string(Dh) +
                     " rotary=" + std::to_string(rotary_dim) + hn.name();
  return {name, "rope_store_kv", cache, cache == DType::F32 ? kPointwise : rounded16(cache), [=](Backend& be) {
            Tensor qd = upload(be, q), kd = upload(be, k), kcd = upload(be, kc), vcd = upload(be, vc);
            with_head_norm(be, hn, [&](const QkNorm* n) {
              be.rope_store_kv(qd, kd, upload(be, v), upload(be, in.positions),
                               RopeParams{upload(be, in.inv_freq), 1.0f, rotary_dim}, upload(be, in.slots),
                               kcd, vcd, n);
            });
            return Outputs{download(be, qd), download(be, kd), widened(be, kcd), widened(be, vcd)};
          }};
}

// A layer's attention inputs from x [T, K] (f32 or the weights' dtype): the q/k/v products, rope
// and the cache stores. Weights uploaded as one stacked group or apart; a bias on each part or
// none; one padding token (slot -1). The caches start random, as in rope_store_kv_case.
// normed_offset: the same through normed_rope_store_kv, x then a residual stream (f32) and the
// norm's unit weight 1 - offset.
OpCase linear_rope_store_kv_case(DType dt, DType x_dt, int T, int K, int H, int Hkv, int Dh, int rotary_dim,
                                 bool stacked, bool bias, uint64_t seed, HeadNorm norm = HeadNorm::None,
                                 std::optional<float> normed_offset = std::nullopt) {
  Rng rng(seed);
  const DType cache = dt == DType::F32 ? DType::F32 : DType::BF16;
  const int rows = T + 9;
  Tensor x = random_tensor(x_dt, {T, K}, rng);
  std::vector<Tensor> w, b;
  for (int n : {H * Dh, Hkv * Dh, Hkv * Dh}) {
    w.push_back(random_tensor(dt, {n, K}, rng, 1.0f / std::sqrt(float(K))));
    b.push_back(bias ? random_tensor(dt, {n}, rng) : Tensor());
  }
  Tensor kc = random_tensor(cache, {rows, Hkv, Dh}, rng), vc = random_tensor(cache, {rows, Hkv, Dh}, rng);
  const RopeInputs in = rope_inputs(T, rows, rotary_dim, rng);
  const HeadNormInputs hn = head_norm_inputs(norm, dt, Dh, rng);
  const std::string op = normed_offset ? "normed_rope_store_kv" : "linear_rope_store_kv";
  const Tensor unit = unit_norm(K, normed_offset.value_or(0.0f));
  std::string name = op + " " + dname(dt) + " x " + dname(x_dt) + " T=" + std::to_string(T) +
                     " K=" + std::to_string(K) + " H=" + std::to_string(H) + " Hkv=" + std::to_string(Hkv) +
                     " Dh=" + std::to_string(Dh) + " rotary=" + std::to_string(rotary_dim) +
                     (stacked ? " stacked" : " apart") + (bias ? " bias" : "") + hn.name() +
                     (normed_offset ? " offset=" + std::to_string(int(*normed_offset)) : "");
  return {name, op, dt, dt == DType::F32 ? kReduction : rounded16(cache), [=](Backend& be) {
            std::vector<Tensor> wd;
            if (stacked)
              wd = be.upload_group(w);
            else
              for (const Tensor& m : w) wd.push_back(upload(be, m));
            std::vector<Tensor> bd, outs;
            for (int i = 0; i < 3; ++i) {
              bd.push_back(bias ? upload(be, b[size_t(i)]) : Tensor());
              outs.push_back(poisoned(be, {T, wd[size_t(i)].dim(0)}));
            }
            Tensor kcd = upload(be, kc), vcd = upload(be, vc);
            const Tensor xd = upload(be, x), pos = upload(be, in.positions), slots = upload(be, in.slots);
            const RopeParams rope{upload(be, in.inv_freq), 1.0f, rotary_dim};
            const LinearPart qp{wd[0], bd[0], outs[0]}, kp{wd[1], bd[1], outs[1]}, vp{wd[2], bd[2], outs[2]};
            const Tensor unit_d = upload(be, unit);
            with_head_norm(be, hn, [&](const QkNorm* n) {
              if (normed_offset)
                be.normed_rope_store_kv(xd, {unit_d, 1e-6f, *normed_offset}, qp, kp, vp, pos, rope, slots,
                                        kcd, vcd, n);
              else
                be.linear_rope_store_kv(xd, qp, kp, vp, pos, rope, slots, kcd, vcd, n);
            });
            return Outputs{download(be, outs[0]), widened(be, kcd), widened(be, vcd)};
          }};
}

// scale: Gemma's sqrt(hidden_size) (1: none).
OpCase embedding_case(DType dt, int V, int D, int T, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  Tensor table = random_tensor(dt, {V, D}, rng);
  std::vector<int32_t> ids(T);
  for (auto& id : ids) id = rng.uniform(0, V - 1);
  ids[0] = V - 1;
  Tensor t_ids = i32_tensor(ids);
  std::string name = "embedding " + dname(dt) + " V=" + std::to_string(V) + " D=" + std::to_string(D) +
                     " T=" + std::to_string(T) + (scale != 1.0f ? " scale=" + std::to_string(scale) : "");
  return {name, "embedding", dt, kExact, [=](Backend& be) {
            Tensor out = poisoned(be, {T, D});
            be.embedding(upload(be, table), upload(be, t_ids), scale, out);
            return Outputs{download(be, out)};
          }};
}

// embedding from a quantized table (MLX quantizes embeddings too); dtype U32 as above.
OpCase quantized_embedding_case(int bits, int group_size, DType scale_dt, int V, int D, int T,
                                uint64_t seed) {
  Rng rng(seed);
  const QuantizedHost table = random_quantized({V, D}, bits, group_size, scale_dt, rng, 1.0f);
  std::vector<int32_t> ids(T);
  for (auto& id : ids) id = rng.uniform(0, V - 1);
  ids[0] = V - 1;
  Tensor t_ids = i32_tensor(ids);
  std::string name = "embedding " + quantized_name(table) + " V=" + std::to_string(V) +
                     " D=" + std::to_string(D) + " T=" + std::to_string(T);
  return {name,
          "embedding",
          DType::U32,
          kExact,
          [=](Backend& be) {
            Tensor out = poisoned(be, {T, D});
            be.embedding(upload(be, table), upload(be, t_ids), 1.0f, out);
            return Outputs{download(be, out)};
          },
          scale_dt};
}

const char* glu_name(Glu act) { return act == Glu::SwiGLU ? "swiglu" : "geglu"; }

// in_dt: gate's and up's dtype; out_dt: out's. in_place writes into gate.
OpCase glu_case(Glu act, int T, int F, uint64_t seed, DType in_dt = DType::F32, DType out_dt = DType::F32,
                bool in_place = false) {
  Rng rng(seed);
  Tensor gate = random_tensor(DType::F32, {T, F}, rng, 4);
  // Saturating gates: exp(-g) overflows or underflows (kept within f16's range).
  for (int64_t i = 0; i < gate.numel(); i += 97) gate.data<float>()[i] = (i % 2 ? 1 : -1) * (20.0f + float(i % 150));
  if (in_dt != DType::F32) {
    Tensor g16 = Tensor::empty(in_dt, {T, F});
    for (int64_t i = 0; i < g16.numel(); ++i) {
      float v = gate.data<float>()[i];
      g16.data<uint16_t>()[i] = in_dt == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
    }
    gate = g16;
  }
  Tensor up = random_tensor(in_dt, {T, F}, rng);
  const DType o_dt = in_place ? in_dt : out_dt;
  std::string name = std::string("glu ") + glu_name(act) + " T=" + std::to_string(T) + " F=" + std::to_string(F) +
                     (in_dt != DType::F32 ? " in " + dname(in_dt) : "") +
                     (o_dt != DType::F32 ? " out " + dname(o_dt) : "") + (in_place ? " in place" : "");
  return {name, "glu", DType::F32, o_dt == DType::F32 ? kPointwise : rounded16(o_dt), [=](Backend& be) {
            Tensor gd = upload(be, gate);
            Tensor out = in_place ? gd : poisoned(be, {T, F}, o_dt);
            be.glu(act, gd, upload(be, up), out);
            return Outputs{widened(be, out)};
          }};
}

// The MLP's gate/up products and glu in one op: f32 x and out (the decode GEMV's form on a GPU),
// weights of dt with or without biases of dt. The gate/up scratch starts as NaN and is not
// compared (a backend may leave it); in_place writes into gate's scratch, as the decoder does.
// normed_offset: through normed_glu, x then a residual stream (f32) and the norm's unit weight
// 1 - offset.
OpCase linear_glu_case(Glu act, DType dt, int T, int K, int F, bool bias, bool in_place, uint64_t seed,
                       bool stacked = false, DType io = DType::F32,
                       std::optional<float> normed_offset = std::nullopt) {
  Rng rng(seed);
  Tensor x = random_tensor(io, {T, K}, rng, normed_offset ? 3.0f : 1.0f);
  Tensor wg = random_tensor(dt, {F, K}, rng, 1.0f / std::sqrt(float(K)));
  Tensor wu = random_tensor(dt, {F, K}, rng, 1.0f / std::sqrt(float(K)));
  Tensor bg = bias ? random_tensor(dt, {F}, rng) : Tensor(), bu = bias ? random_tensor(dt, {F}, rng) : Tensor();
  const std::string op = normed_offset ? "normed_glu" : "linear_glu";
  const Tensor unit = unit_norm(K, normed_offset.value_or(0.0f));
  std::string name = op + " " + glu_name(act) + " " + dname(dt) + " T=" + std::to_string(T) +
                     " K=" + std::to_string(K) + " F=" + std::to_string(F) + (bias ? " bias" : "") +
                     (in_place ? " out=gate" : "") + (stacked ? " stacked" : "") +
                     (io != DType::F32 ? std::string(" io=") + dname(io) : "") +
                     (normed_offset ? " offset=" + std::to_string(int(*normed_offset)) : "");
  return {name, op, dt, io == DType::F32 ? kReduction : rounded16(io), [=](Backend& be) {
            Tensor bgd = bias ? upload(be, bg) : Tensor(), bud = bias ? upload(be, bu) : Tensor();
            Tensor g = poisoned(be, {T, F}, io), u = poisoned(be, {T, F}, io);
            Tensor out = in_place ? g : poisoned(be, {T, F}, io);
            std::vector<Tensor> w =
                stacked ? be.upload_group({wg, wu}) : std::vector<Tensor>{upload(be, wg), upload(be, wu)};
            if (normed_offset)
              be.normed_glu(act, upload(be, x), {upload(be, unit), 1e-6f, *normed_offset}, {w[0], bgd, g},
                            {w[1], bud, u}, out);
            else
              be.linear_glu(act, upload(be, x), {w[0], bgd, g}, {w[1], bud, u}, out);
            return Outputs{widened(be, out)};
          }};
}

// Logits spread over [-4 cap, 4 cap], so that tanh runs from nearly linear to saturated.
OpCase softcap_case(int R, int V, float cap, uint64_t seed) {
  Rng rng(seed);
  Tensor x = random_tensor(DType::F32, {R, V}, rng, 4 * cap);
  std::string name = "softcap R=" + std::to_string(R) + " V=" + std::to_string(V) + " cap=" + std::to_string(cap);
  return {name, "softcap", DType::F32, kPointwise, [=](Backend& be) {
            Tensor xd = upload(be, x);
            be.softcap(xd, cap);
            return Outputs{download(be, xd)};
          }};
}

OpCase add_case(int T, int D, bool in_place, uint64_t seed) {
  Rng rng(seed);
  Tensor a = random_tensor(DType::F32, {T, D}, rng), b = random_tensor(DType::F32, {T, D}, rng);
  std::string name = "add T=" + std::to_string(T) + " D=" + std::to_string(D) + (in_place ? " in place" : "");
  return {name, "add", DType::F32, kExact, [=](Backend& be) {
            Tensor ad = upload(be, a);
            Tensor out = in_place ? ad : poisoned(be, {T, D});
            be.add(ad, upload(be, b), out);
            return Outputs{download(be, out)};
          }};
}

// R distinct rows of out [T, D] get weighted rows of x added (a mixture of experts' outputs).
OpCase scatter_add_rows_case(int T, int D, int R, uint64_t seed) {
  Rng rng(seed);
  Tensor x = random_tensor(DType::F32, {R, D}, rng), out0 = random_tensor(DType::F32, {T, D}, rng);
  std::vector<int32_t> rows(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) rows[size_t(t)] = t;
  for (int t = T - 1; t > 0; --t) std::swap(rows[size_t(t)], rows[size_t(rng.uniform(0, t))]);
  rows.resize(size_t(R));
  std::vector<float> weights(static_cast<size_t>(R));
  for (auto& w : weights) w = float(rng.uniform(0, 1000)) / 1000.0f;
  Tensor t_rows = i32_tensor(rows), t_weights = Tensor::empty(DType::F32, {R});
  std::copy(weights.begin(), weights.end(), t_weights.data<float>());
  std::string name = "scatter_add_rows T=" + std::to_string(T) + " D=" + std::to_string(D) + " R=" + std::to_string(R);
  // A multiply and an add, which a backend may fuse (one rounding instead of two).
  return {name, "scatter_add_rows", DType::F32, kPointwise, [=](Backend& be) {
            Tensor fresh = Tensor::empty(DType::F32, {T, D});  // upload may return the host tensor
            std::copy(out0.data<float>(), out0.data<float>() + out0.numel(), fresh.data<float>());
            Tensor out = upload(be, fresh);
            be.scatter_add_rows(upload(be, x), upload(be, t_rows), upload(be, t_weights), out);
            return Outputs{download(be, out)};
          }};
}

// Router logits of T tokens over E experts: normal values, or with `ties` small integers (many
// equal logits: the lower expert must win). Outputs: the ids (as floats: any other expert is far
// off) and the weights.
OpCase moe_route_case(int T, int E, int k, bool renormalize, bool ties, uint64_t seed) {
  Rng rng(seed);
  Tensor logits = random_tensor(DType::F32, {T, E}, rng, 2);
  if (ties)
    for (int64_t i = 0; i < logits.numel(); ++i) logits.data<float>()[i] = float(rng.uniform(0, 3));
  std::string name = "moe_route T=" + std::to_string(T) + " E=" + std::to_string(E) + " k=" + std::to_string(k) +
                     (renormalize ? " renormalized" : "") + (ties ? " ties" : "");
  // exp and a sum of E terms in another order: a few ulp in each weight.
  return {name, "moe_route", DType::F32, kPointwise, [=](Backend& be) {
            Tensor ids = be.upload(i32_tensor(std::vector<int32_t>(size_t(T * k), -1), {T, k}));
            Tensor weights = poisoned(be, {T, k});
            be.moe_route(upload(be, logits), k, renormalize, ids, weights);
            std::vector<int32_t> got(static_cast<size_t>(T * k));
            be.download(ids, got.data());
            return Outputs{std::vector<float>(got.begin(), got.end()), download(be, weights)};
          }};
}

// T tokens each routed to k distinct experts of E (chosen at random, so that some experts get
// many tokens and some none), weights in (0, 1); experts uploaded as nn::MoeMlp uploads them
// (Backend::upload_experts).
OpCase moe_experts_case(Glu act, DType dt, int T, int H, int I, int E, int k, uint64_t seed) {
  Rng rng(seed);
  Tensor h = random_tensor(DType::F32, {T, H}, rng), x0 = random_tensor(DType::F32, {T, H}, rng);
  std::vector<Tensor> gate, up, down;
  for (int e = 0; e < E; ++e) {
    gate.push_back(random_tensor(dt, {I, H}, rng, 1.0f / std::sqrt(float(H))));
    up.push_back(random_tensor(dt, {I, H}, rng, 1.0f / std::sqrt(float(H))));
    down.push_back(random_tensor(dt, {H, I}, rng, 1.0f / std::sqrt(float(I))));
  }
  std::vector<int32_t> ids;
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int t = 0; t < T; ++t) {
    std::iota(order.begin(), order.end(), 0);
    for (int j = 0; j < k; ++j) std::swap(order[size_t(j)], order[size_t(rng.uniform(j, E - 1))]);
    ids.insert(ids.end(), order.begin(), order.begin() + k);
  }
  Tensor weights = Tensor::empty(DType::F32, {T, k});
  for (int64_t i = 0; i < weights.numel(); ++i) weights.data<float>()[i] = float(rng.uniform(1, 1000)) / 1000.0f;
  const Tensor t_ids = i32_tensor(ids, {T, k});
  std::string name = std::string("moe_experts ") + glu_name(act) + " " + dname(dt) + " T=" + std::to_string(T) +
                     " H=" + std::to_string(H) + " I=" + std::to_string(I) + " E=" + std::to_string(E) +
                     " k=" + std::to_string(k);
  return {name, "moe_experts", dt, kReduction, [=](Backend& be) {
            const Experts ex = be.upload_experts(gate, up, down);
            Tensor fresh = Tensor::empty(DType::F32, {T, H});  // upload may return the host tensor
            std::copy(x0.data<float>(), x0.data<float>() + x0.numel(), fresh.data<float>());
            Tensor x = upload(be, fresh);
            be.moe_experts(act, upload(be, h), upload(be, t_ids), upload(be, weights), ex, x);
            return Outputs{download(be, x)};
          }};
}

OpCase gather_rows_case(int R0, int D, int R, uint64_t seed) {
  Rng rng(seed);
  Tensor x = random_tensor(DType::F32, {R0, D}, rng);
  std::vector<int32_t> rows(R);
  for (auto& r : rows) r = rng.uniform(0, R0 - 1);
  Tensor t_rows = i32_tensor(rows);
  std::string name = "gather_rows R0=" + std::to_string(R0) + " D=" + std::to_string(D) + " R=" + std::to_string(R);
  return {name, "gather_rows", DType::F32, kExact, [=](Backend& be) {
            Tensor out = poisoned(be, {R, D});
            be.gather_rows(upload(be, x), upload(be, t_rows), out);
            return Outputs{download(be, out)};
          }};
}

// Rows of small integers (many ties: the first maximum must win) or of normal values, with
// -inf entries (masked tokens); out starts as -1 in every row.
OpCase argmax_rows_case(int R, int N, bool ties, uint64_t seed) {
  Rng rng(seed);
  Tensor x = random_tensor(DType::F32, {R, N}, rng);
  for (int64_t i = 0; i < x.numel(); ++i) {
    float& v = x.data<float>()[i];
    if (ties) v = float(rng.uniform(0, 3));
    if (rng.uniform(0, 9) == 0) v = -std::numeric_limits<float>::infinity();
  }
  std::string name = "argmax_rows R=" + std::to_string(R) + " N=" + std::to_string(N) + (ties ? " ties" : "");
  return {name, "argmax_rows", DType::F32, kExact, [=](Backend& be) {
            Tensor out = be.upload(i32_tensor(std::vector<int32_t>(size_t(R), -1)));
            be.argmax_rows(upload(be, x), out);
            std::vector<int32_t> ids(static_cast<size_t>(R));
            be.download(out, ids.data());
            return Outputs{std::vector<float>(ids.begin(), ids.end())};
          }};
}

// Penalties and biases on R rows: each kind of edit and their mixes on distinct random logits of
// both signs (a repetition penalty divides positive ones and multiplies the rest), large negative
// biases included (the harness wants finite outputs; the sampler tests cover -inf). Every step
// rounds on its own, so the results must be the reference's exactly.
OpCase edit_logits_case(int R, int V, int per_row, uint64_t seed) {
  Rng rng(seed);
  Tensor x = random_tensor(DType::F32, {R, V}, rng, 4.0f);
  std::vector<LogitEdit> edits;
  for (int r = 0; r < R; ++r) {
    std::vector<int32_t> ids(static_cast<size_t>(V));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng.gen);
    for (int i = 0; i < std::min(per_row, V); ++i) {
      LogitEdit e{r, ids[size_t(i)], uint32_t(1 + i % 7)};
      e.repetition = i % 3 ? 1.3f : 0.77f;
      e.subtract = 0.5f + 0.2f * float(i % 5);
      e.add = i % 11 == 0 ? -100.0f : 0.1f * float(i % 9) - 0.35f;
      edits.push_back(e);
    }
  }
  std::string name = "edit_logits R=" + std::to_string(R) + " V=" + std::to_string(V) + " " +
                     std::to_string(edits.size()) + " edits";
  return {name, "edit_logits", DType::F32, kExact, [=](Backend& be) {
            Tensor xd = upload(be, x);
            be.edit_logits(xd, edits);
            return Outputs{download(be, xd)};
          }};
}

// Rows of R logits (flat or peaked, coarse so that values tie, or peaked with masked -inf tokens)
// drawn with every kind of cut: greedy, temperature alone (id order), top-k, top-p, min-p and
// their mixes, uniforms from 0 to just below 1. The draws must be the reference's exactly (a
// sampler whose sums are ordered differently could differ only where u lands within rounding of
// a boundary).
OpCase sample_rows_case(int R, int V, int shape, uint64_t seed) {
  Rng rng(seed);
  const float scale = shape == 1 || shape == 3 ? 4.0f : 1.0f;
  Tensor x = random_tensor(DType::F32, {R, V}, rng, scale);
  if (shape == 2)
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::round(x.data<float>()[i] * 4.0f) / 4.0f;
  if (shape == 3)
    for (int64_t i = 0; i < x.numel(); i += 5) x.data<float>()[i] = -std::numeric_limits<float>::infinity();
  const RowSampling kinds[] = {{0.0f, 0, 1.0f, 0.0f, 0}, {1.0f, 0, 1.0f, 0.0f, 0}, {0.8f, 0, 0.95f, 0.0f, 0},
                               {0.7f, 40, 1.0f, 0.0f, 0}, {1.2f, 0, 1.0f, 0.05f, 0}, {0.6f, 50, 0.9f, 0.1f, 0},
                               {1.0f, 1, 1.0f, 0.0f, 0},  {0.9f, 0, 0.5f, 0.0f, 0}};
  const double us[] = {0.0, 0.5, 0.999999, 0.25, 0.75, 0.123456789};
  std::vector<RowSampling> rows;
  for (int r = 0; r < R; ++r) {
    RowSampling d = kinds[(r + shape) % 8];
    d.u = r < 6 ? us[r] : std::uniform_real_distribution<double>(0, 1)(rng.gen);
    rows.push_back(d);
  }
  std::string name = "sample_rows R=" + std::to_string(R) + " V=" + std::to_string(V) +
                     (shape == 1 ? " peaked" : shape == 2 ? " ties" : shape == 3 ? " masked" : "");
  return {name, "sample_rows", DType::F32, kExact, [=](Backend& be) {
            Tensor out = be.upload(i32_tensor(std::vector<int32_t>(size_t(R), -1)));
            be.sample_rows(upload(be, x), rows, out);
            std::vector<int32_t> ids(static_cast<size_t>(R));
            be.download(out, ids.data());
            return Outputs{std::vector<float>(ids.begin(), ids.end())};
          }};
}

// Log-probabilities of R rows (normal values, or coarse ones so that values tie and the lower id
// must come first), for a subset of the rows in a shuffled order, at the tokens a draw or a
// text gives, with the top_n list. The normaliser's sum is in double on every backend and only its
// order may differ, so values agree to a unit in the last place (NMSE far below 1e-12) and ids
// exactly (an id off gives an NMSE near 1). masked: values [V / 3, V - 500) are -inf (a mask or
// a bias), the tokens below them; at V = 9000 a whole 4096-value chunk of the GPU's is -inf.
OpCase logprobs_case(int R, int V, int top_n, bool ties, uint64_t seed, bool masked = false) {
  Rng rng(seed);
  Tensor x = random_tensor(DType::F32, {R, V}, rng, 3.0f);
  if (ties)
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::round(x.data<float>()[i] * 2.0f) / 2.0f;
  if (masked)
    for (int r = 0; r < R; ++r)
      for (int j = V / 3; j < V - 500; ++j) x.data<float>()[int64_t(r) * V + j] = -INFINITY;
  std::vector<int32_t> tokens(static_cast<size_t>(R)), rows;
  for (auto& t : tokens) t = int32_t(rng.uniform(0, (masked ? V / 3 : V) - 1));
  for (int r = 0; r < R; ++r)
    if (R < 3 || r % 3 != 1) rows.push_back(r);
  std::shuffle(rows.begin(), rows.end(), rng.gen);
  const int n = int(rows.size());
  std::string name = "logprobs R=" + std::to_string(R) + " V=" + std::to_string(V) + " rows=" + std::to_string(n) +
                     " top " + std::to_string(top_n) + (ties ? " ties" : "") + (masked ? " masked" : "");
  return {name, "logprobs", DType::F32, 1e-12, [=](Backend& be) {
            Tensor lp = poisoned(be, {n, 1 + top_n}, DType::F32);
            Tensor ids = be.upload(i32_tensor(std::vector<int32_t>(size_t(n) * size_t(std::max(top_n, 1)), -1)));
            be.logprobs(upload(be, x), be.upload(i32_tensor(rows)), be.upload(i32_tensor(tokens)), top_n, lp, ids);
            std::vector<int32_t> got(static_cast<size_t>(n) * size_t(top_n));
            if (top_n > 0) be.download(ids, got.data());
            return Outputs{widened(be, lp), std::vector<float>(got.begin(), got.end())};
          }};
}

const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

}  // namespace

std::vector<OpCase> op_cases(const std::string& op) {
  std::vector<OpCase> cases;
  uint64_t seed = 1;
  if (op == "linear") {
    // T: none (a step where no sequence needs logits), decode (1-2, the GPU's GEMV), small batches
    // (3-16: on Hopper the skinny product where K is a multiple of 64, with N not one of 128),
    // the GEMM path beyond; K and N not multiples of 8/16/32 next to the round model sizes.
    struct S { int T, K, N; };
    const S shapes[] = {{0, 64, 32},   {1, 64, 32},   {1, 67, 33},    {1, 1000, 129}, {1, 4096, 40},  {2, 515, 77},
                        {3, 256, 255}, {4, 2048, 96},  {5, 33, 7},     {8, 515, 77},   {8, 1024, 130},
                        {9, 100, 70},  {17, 300, 50},  {33, 2048, 72}, {64, 256, 200}, {130, 129, 257},
                        {128, 512, 384}, {8, 2500, 40},  {3, 4100, 33},  // these two: x in several K chunks
                        {16, 4096, 300}, {2, 512, 101},
                        // Rows past one wave of the GPU's GEMV: its k in two halves a row (K % 16 == 0).
                        {1, 512, 6144}, {1, 520, 6144}, {2, 512, 2500}, {2, 512, 5000}};
    for (DType dt : kFloatTypes)
      for (const S& s : shapes)
        for (bool bias : {false, true}) cases.push_back(linear_case(dt, s.T, s.K, s.N, bias, seed++));
    // 16-bit activations: input and output (q/k/v, gate/up), input only (down), output only.
    for (DType dt : {DType::BF16, DType::F16})
      for (const S& s : {S{1, 64, 32}, S{3, 256, 255}, S{9, 100, 70}, S{64, 256, 200}, S{130, 129, 257}}) {
        cases.push_back(linear_case(dt, s.T, s.K, s.N, s.T % 2 == 1, seed++, dt, dt));
        cases.push_back(linear_case(dt, s.T, s.K, s.N, false, seed++, dt, DType::F32));
        cases.push_back(linear_case(dt, s.T, s.K, s.N, true, seed++, DType::F32, dt));
      }
    // Quantized weights: every width MLX writes, its group sizes and scale dtypes; token counts on
    // both sides of the CPU's decode kernel's (1, 2-8 in groups of up to 4) and the GEMM's, and of
    // the GPU's products on the codes (1-2; 1-64 on the tensor cores; then widened); rows
    // past a multiple of 4 and of the threads' grain; a group of 12 (not whole octets) takes the
    // dequantizing path at every T.
    struct Q {
      int bits, group;
      DType scale;
    };
    const Q widths[] = {{4, 64, DType::BF16}, {4, 32, DType::F16},  {4, 128, DType::F32},
                        {8, 64, DType::BF16}, {2, 64, DType::BF16}, {3, 64, DType::BF16},
                        {5, 32, DType::F16},  {6, 64, DType::BF16}, {8, 12, DType::BF16}};
    for (const Q& q : widths)
      for (const S& s : {S{0, 384, 32}, S{1, 384, 33}, S{2, 768, 77}, S{5, 384, 130}, S{8, 1536, 41},
                         S{9, 384, 70}, S{33, 768, 200}, S{1, 4608, 300}})
        cases.push_back(quantized_linear_case(q.bits, q.group, q.scale, s.T, s.K, s.N, s.T % 2 == 1, seed++));
    // The GPU's tensor-core product (1-64 tokens; 4- or 8-bit codes, bf16 or f16 scales; K a
    // multiple of 8 groups): each width, group size and token tile (8, 16, 32, 64 tokens, and 12:
    // part of one), rows past a block of 128, k in ranges (and in one, K 512).
    for (int bits : {4, 8})
      for (int group : {32, 64, 128})
        for (const S& s : {S{1, 1024, 300}, S{2, 2048, 130}, S{3, 1024, 300}, S{8, 2048, 129},
                           S{16, 1024, 513}, S{17, 2048, 257}, S{32, 1024, 64}, S{40, 4096, 96},
                           S{64, 3072, 600}, S{5, 512, 300}, S{12, 2048, 300}})
          cases.push_back(
              quantized_linear_case(bits, group, DType::BF16, s.T, s.K, s.N, s.T % 2 == 0, seed++));
    for (int bits : {4, 8})
      for (int group : {32, 128})
        for (const S& s : {S{1, 2048, 300}, S{8, 1024, 129}, S{24, 2048, 257}, S{64, 1024, 200}})
          cases.push_back(
              quantized_linear_case(bits, group, DType::F16, s.T, s.K, s.N, s.T % 2 == 0, seed++));
    // K of two stages: one k range, whose sums the product writes itself (no sum kernel after).
    for (int bits : {4, 8})
      for (int T : {1, 16, 64})
        cases.push_back(quantized_linear_case(bits, 32, DType::BF16, T, 2048 / bits, 300, T == 1, seed++));
  } else if (op == "attention") {
    std::vector<AttnShape> shapes = {
        {{1}, {1}, 8, 4, 8, 16},                          // first token; stories260K-sized heads
        {{1}, {37}, 32, 8, 64, 16},                       // decode, group 4
        {{1}, {700}, 8, 8, 64, 16},                       // long decode, group 1
        {{1}, {1500}, 16, 2, 128, 32},                    // long decode, group 8
        {{1, 1, 1, 1, 1, 1, 1, 1}, {5, 90, 17, 300, 1, 64, 65, 33}, 32, 8, 64, 16},  // batched decode, ragged
        {{13}, {13}, 4, 2, 72, 16},                       // prefill, Dh not a multiple of 16
        {{20, 1, 7}, {20, 44, 30}, 8, 1, 40, 5},          // mixed prefill/decode, MQA, odd block size
        {{64}, {100}, 16, 4, 64, 16},                     // chunked prefill after a cached prefix
        {{30}, {30}, 8, 4, 256, 16, 8},                   // sliding window, Dh 256
        {{1, 9}, {400, 9}, 8, 2, 64, 16, 128},            // sliding window, long decode
        {{12, 1}, {12, 50}, 8, 4, 64, 16, 0, 50.0f},      // softcap
        {{6}, {6}, 4, 4, 20, 3, 4, 30.0f},                // window + softcap, Dh 20
        // One kv head at batch 1: fewer items than threads, so the keys are split over threads.
        {{1}, {900}, 8, 1, 64, 16},                       // MQA decode
        {{1}, {2000}, 4, 1, 128, 16, 700},                // MQA decode, sliding window
        {{1}, {1200}, 2, 1, 40, 7, 0, 30.0f},             // MQA decode, softcap, odd block size
        // Few sequences: on a GPU, key splits of 128 merged in a cluster (2, 3 and 4 here; in the
        // second, one sequence's last split empty), or one split.
        {{1}, {200}, 32, 8, 128, 16},                     // decode, group 4, Dh 128
        {{1, 1}, {450, 130}, 32, 8, 64, 16},              // batched decode, ragged
        {{1, 1, 1}, {450, 130, 333}, 32, 8, 64, 16},      // batched decode, ragged
        {{1}, {100}, 16, 4, 128, 16},                     // short decode
    };
    // 32 sequences x 8 kv heads: 256 blocks, on a GPU of 128+ SMs the decode's deep form (two steps
    // of keys in flight a warp); ragged contexts, odd and even numbers of 16-key steps.
    AttnShape wide{std::vector<int>(32, 1), {}, 32, 8, 128, 16};
    for (int i = 0; i < 32; ++i) wide.ctx_lens.push_back(1 + (i * 37) % 600);
    shapes.push_back(wide);
    wide.Dh = 64;
    shapes.push_back(wide);
    for (DType cache : kFloatTypes)
      for (const auto& s : shapes) cases.push_back(attention_case(s, cache, seed++));
    // Outputs in the 16-bit format of the product they feed: decode, prefill, split keys.
    for (DType out : {DType::BF16, DType::F16})
      for (const auto& s : {shapes[1], shapes[3], shapes[7]}) cases.push_back(attention_case(s, DType::BF16, seed++, out));
  } else if (op == "rms_norm") {
    for (DType dt : kFloatTypes)
      for (int D : {8, 67, 2048, 3000})
        for (int T : {1, 9})
          for (float offset : {0.0f, 1.0f}) cases.push_back(rms_norm_case(dt, T, D, offset, seed++));
    // Per-head q/k norms: many short rows.
    for (DType dt : kFloatTypes) cases.push_back(rms_norm_case(dt, 32, 128, 0.0f, seed++));
    for (DType out : {DType::BF16, DType::F16})
      for (int D : {67, 4096}) cases.push_back(rms_norm_case(out, 9, D, 0.0f, seed++, out));
  } else if (op == "add_rms_norm") {
    for (DType dt : kFloatTypes)
      for (auto [T, D] : {std::pair{1, 4096}, {33, 1000}, {7, 64}, {3, 5120}, {2, 8192}, {1, 10000}})
        for (bool out_is_delta : {false, true}) cases.push_back(add_rms_norm_case(dt, T, D, T == 33 ? 1.0f : 0.0f, out_is_delta, seed++));
    for (DType out : {DType::BF16, DType::F16})
      for (int D : {67, 4096}) cases.push_back(add_rms_norm_case(out, 9, D, 0.0f, false, seed++, out));
  } else if (op == "linear_add_rms_norm") {
    // T 1-2: the GPU's GEMV; 9: its skinny product; 17-64: on Hopper its narrow product, k split
    // into ranges the add sums (K = 1344: 21 chunks in 5 uneven ranges, at 24 tokens a range's odd
    // chunk alone in the last two-chunk stage; N = 200: groups of 15-16 rows);
    // 24 with K = 264 (not a multiple of 64) and 130: cuBLASLt, where the GPU may split k (264:
    // not into 4 ranges of whole 16-byte pieces). 16-bit a from 3 tokens, as in the decoder.
    struct S { int T, K, N; };
    for (DType dt : kFloatTypes)
      for (const S& s : {S{1, 256, 128}, S{2, 256, 128}, S{9, 256, 128}, S{24, 2048, 384}, S{64, 2048, 384},
                         S{64, 256, 128}, S{17, 1024, 200}, S{40, 1344, 256}, S{24, 1344, 200}, S{24, 264, 96},
                         S{130, 512, 128}}) {
        const DType a_dt = s.T > 2 ? dt : DType::F32;
        cases.push_back(linear_add_rms_norm_case(dt, a_dt, s.T, s.K, s.N, false, false, seed++));
        if (s.K == 256) cases.push_back(linear_add_rms_norm_case(dt, a_dt, s.T, s.K, s.N, true, s.T == 9, seed++));
      }
  } else if (op == "rope") {
    cases.push_back(rope_case(1, 32, 64, 64, 1.0f, 200, seed++));
    cases.push_back(rope_case(7, 8, 128, 128, 1.0f, 131000, seed++));
    cases.push_back(rope_case(5, 3, 80, 32, 1.2f, 5000, seed++));  // partial rotary, yarn-style scaling
    cases.push_back(rope_case(33, 4, 8, 8, 1.0f, 512, seed++));
    cases.push_back(rope_case(16, 2, 256, 256, 1.0f, 40000, seed++));
  } else if (op == "store_kv") {
    // Rows of 20 elements: the 16-bit conversions' scalar tails.
    for (DType cache : kFloatTypes) {
      cases.push_back(store_kv_case(cache, 1, 8, 64, 48, seed++));
      cases.push_back(store_kv_case(cache, 13, 2, 72, 40, seed++));
      cases.push_back(store_kv_case(cache, 30, 1, 20, 31, seed++));
    }
  } else if (op == "rope_store_kv") {
    for (DType cache : kFloatTypes) {
      cases.push_back(rope_store_kv_case(cache, 1, 32, 8, 128, 128, seed++));  // decode, 8B heads
      cases.push_back(rope_store_kv_case(cache, 7, 8, 2, 64, 32, seed++));     // partial rotary
      cases.push_back(rope_store_kv_case(cache, 40, 4, 4, 80, 80, seed++));
      // Each head normalised first: decode with Qwen3's heads; partial rotary over 80-wide heads
      // (not a multiple of 32) with Gemma 3's offset; 256-wide heads over a padded prefill.
      cases.push_back(rope_store_kv_case(cache, 1, 32, 8, 128, 128, seed++, HeadNorm::Plain));
      cases.push_back(rope_store_kv_case(cache, 7, 8, 2, 80, 48, seed++, HeadNorm::Offset));
      cases.push_back(rope_store_kv_case(cache, 40, 4, 4, 256, 256, seed++, HeadNorm::Plain));
    }
  } else if (op == "linear_rope_store_kv") {
    // T 1-2: the GPU's GEMV; 9: its skinny product; 40 and 600: one product over stacked rows
    // read in place by the rope kernel (bf16/f16, stacked, no bias), else the group then rope.
    for (DType dt : kFloatTypes)
      for (int T : {1, 9, 40, 600})
        for (bool stacked : {true, false}) {
          const DType x_dt = T > 2 && T % 2 == 0 ? dt : DType::F32;
          cases.push_back(linear_rope_store_kv_case(dt, x_dt, T, 256, 8, 2, 64, 64, stacked, false, seed++));
        }
    // 33 tokens of K = 1280 (20 chunks): on Hopper the narrow product in 5 k ranges, summed by the rope kernel.
    for (DType dt : kFloatTypes) {
      cases.push_back(linear_rope_store_kv_case(dt, DType::F32, 40, 128, 6, 3, 32, 16, true, false, seed++));
      cases.push_back(linear_rope_store_kv_case(dt, dt, 40, 128, 4, 2, 64, 64, true, true, seed++));
      cases.push_back(linear_rope_store_kv_case(dt, dt, 33, 1280, 8, 2, 64, 64, true, false, seed++));
      // qk-norm models, at the token counts of the GPU's GEMV, of its stacked product and of that
      // product split into 5 k ranges (K = 1280).
      cases.push_back(linear_rope_store_kv_case(dt, DType::F32, 1, 256, 8, 2, 64, 64, true, false, seed++,
                                                HeadNorm::Plain));
      cases.push_back(
          linear_rope_store_kv_case(dt, dt, 40, 128, 4, 2, 64, 64, true, false, seed++, HeadNorm::Offset));
      cases.push_back(
          linear_rope_store_kv_case(dt, dt, 33, 1280, 8, 2, 64, 64, true, false, seed++, HeadNorm::Plain));
    }
  } else if (op == "embedding") {
    for (DType dt : kFloatTypes) {
      cases.push_back(embedding_case(dt, 50, 64, 1, seed++));
      cases.push_back(embedding_case(dt, 300, 67, 9, seed++));
      cases.push_back(embedding_case(dt, 1000, 2048, 33, seed++));
      cases.push_back(embedding_case(dt, 300, 67, 9, seed++, 59.75f));
    }
    for (int bits : {4, 3, 8})
      cases.push_back(quantized_embedding_case(bits, 64, DType::BF16, 300, 128, 9, seed++));
  } else if (op == "glu") {
    for (Glu act : {Glu::SwiGLU, Glu::GeGLU}) {
      for (auto [T, F] : {std::pair{1, 8}, {1, 67}, {3, 8192}, {17, 1000}}) cases.push_back(glu_case(act, T, F, seed++));
      // 16-bit activations; F = 8192 takes the 8-wide path, 67 and 1003 the scalar one.
      for (DType dt : {DType::BF16, DType::F16})
        for (auto [T, F] : {std::pair{3, 8192}, {1, 67}, {5, 1003}}) {
          cases.push_back(glu_case(act, T, F, seed++, dt, dt));
          cases.push_back(glu_case(act, T, F, seed++, dt, dt, true));
          cases.push_back(glu_case(act, T, F, seed++, DType::F32, dt));
        }
    }
  } else if (op == "linear_add") {
    // T 1-2: the GPU's GEMV adding into x; 5: the product, then the add.
    for (DType dt : kFloatTypes)
      for (int T : {1, 2, 5}) {
        // 96 rows: half-rows on 132 SMs; 4,096 (an 8B's o): whole rows.
        cases.push_back(linear_add_case(dt, T, 512, 96, T == 2, seed++));
        cases.push_back(linear_add_case(dt, T, 256, 4096, false, seed++));
      }
  } else if (op == "normed_rope_store_kv") {
    // T 1-2: the GPU's GEMV normalising x as it reads; 9: the norm, then the products. An 8B's
    // heads (6,144 rows: half-rows on 132 SMs), 4,096 rows (whole rows), partial rotary with a
    // Gemma-style offset and biases, qk-norm (the norm, then the products, at any count).
    for (DType dt : kFloatTypes)
      for (int T : {1, 2, 9}) {
        cases.push_back(linear_rope_store_kv_case(dt, DType::F32, T, 256, 32, 8, 128, 128, true, false,
                                                  seed++, HeadNorm::None, 0.0f));
        cases.push_back(linear_rope_store_kv_case(dt, DType::F32, T, 256, 24, 4, 128, 128, true, false,
                                                  seed++, HeadNorm::None, 0.0f));
        cases.push_back(linear_rope_store_kv_case(dt, DType::F32, T, 128, 6, 3, 80, 48, true, T == 2, seed++,
                                                  HeadNorm::None, 1.0f));
        cases.push_back(linear_rope_store_kv_case(dt, DType::F32, T, 256, 8, 2, 64, 64, true, false, seed++,
                                                  HeadNorm::Plain, 0.0f));
      }
  } else if (op == "normed_glu") {
    for (DType dt : kFloatTypes)
      for (int T : {1, 2, 9}) {
        cases.push_back(
            linear_glu_case(Glu::SwiGLU, dt, T, 256, 352, T == 2, true, seed++, true, DType::F32, 0.0f));
        cases.push_back(
            linear_glu_case(Glu::GeGLU, dt, T, 512, 96, false, false, seed++, true, DType::F32, 1.0f));
      }
  } else if (op == "linear_glu") {
    // T 1-2: the GPU's fused GEMV (K = 64: 8 lanes of 32 busy; 256: one piece a lane; 4096: 16,
    // past the 4 prefetched); 3 and 17: its group products and glu. F not a multiple of the
    // GEMV's 8 warps per block next to round sizes. In place (out = gate's scratch, as in the
    // decoder) with biases at odd T. GeGLU on the same shapes without the bias variants.
    for (DType dt : kFloatTypes)
      for (int T : {1, 2, 3, 17})
        for (auto [K, F] : {std::pair{64, 8}, {256, 67}, {4096, 200}}) {
          for (bool bias : {false, true})
            cases.push_back(linear_glu_case(Glu::SwiGLU, dt, T, K, F, bias, false, seed++));
          cases.push_back(linear_glu_case(Glu::SwiGLU, dt, T, K, F, T % 2 == 1, true, seed++));
          cases.push_back(linear_glu_case(Glu::GeGLU, dt, T, K, F, false, true, seed++));
        }
    // Weights stacked as the decoder uploads them: past 16 tokens (up to 128) the GPU runs one
    // product over both and glu on its halves (F a multiple of 8; 67 is not, and takes the
    // default), in f32 or, as in the decoder, with x, the scratch and out of the weights' dtype
    // (on Hopper up to 64 tokens: the narrow product's MLP form; F = 200: groups of 15-16 rows).
    for (DType dt : {DType::BF16, DType::F16})
      for (int T : {17, 33, 64, 129})
        for (auto [K, F] : {std::pair{256, 67}, {4096, 200}}) {
          // The decoder's form, then f32 x and out.
          cases.push_back(linear_glu_case(Glu::SwiGLU, dt, T, K, F, false, true, seed++, true, dt));
          cases.push_back(linear_glu_case(Glu::GeGLU, dt, T, K, F, false, false, seed++, true));
        }
  } else if (op == "softcap") {
    cases.push_back(softcap_case(1, 7, 30.0f, seed++));
    cases.push_back(softcap_case(3, 1000, 4.0f, seed++));
    cases.push_back(softcap_case(9, 128256, 30.0f, seed++));
  } else if (op == "add") {
    for (auto [T, D] : {std::pair{1, 7}, {1, 2048}, {9, 1003}})
      for (bool in_place : {false, true}) cases.push_back(add_case(T, D, in_place, seed++));
  } else if (op == "gather_rows") {
    cases.push_back(gather_rows_case(4, 64, 0, seed++));
    cases.push_back(gather_rows_case(1, 64, 1, seed++));
    cases.push_back(gather_rows_case(20, 67, 5, seed++));
    cases.push_back(gather_rows_case(130, 2048, 8, seed++));
  } else if (op == "scatter_add_rows") {
    for (auto [T, D, R] : {std::tuple{4, 64, 0}, {1, 64, 1}, {20, 67, 5}, {130, 2048, 130}})
      cases.push_back(scatter_add_rows_case(T, D, R, seed++));
  } else if (op == "moe_route") {
    cases.push_back(moe_route_case(1, 8, 2, true, false, seed++));
    cases.push_back(moe_route_case(5, 128, 8, false, false, seed++));
    cases.push_back(moe_route_case(3, 60, 4, true, true, seed++));
    cases.push_back(moe_route_case(40, 256, 8, true, false, seed++));
    cases.push_back(moe_route_case(2, 1000, 10, false, true, seed++));
    cases.push_back(moe_route_case(3, 100, 40, true, false, seed++));  // past one choice a lane
  } else if (op == "moe_experts") {
    // One token (decode at batch 1); many pairs an expert (passes of 8 over each row); a
    // Qwen3-MoE-like spread, 8 of 32 experts a token; I not a multiple of 8, and past 512 tokens
    // (a GPU's host grouping). With H and I multiples of 64, 16-bit experts from 8 tokens run in
    // Hopper's tensor-core tiles (the two bf16 cases of 33 and 40 tokens above, and): rows past a
    // tile's last (H = 320), several tiles an expert, past 512 tokens.
    cases.push_back(moe_experts_case(Glu::SwiGLU, DType::BF16, 1, 256, 64, 8, 2, seed++));
    cases.push_back(moe_experts_case(Glu::GeGLU, DType::F32, 1, 128, 32, 4, 2, seed++));
    cases.push_back(moe_experts_case(Glu::SwiGLU, DType::F32, 3, 64, 40, 4, 2, seed++));
    cases.push_back(moe_experts_case(Glu::GeGLU, DType::F16, 17, 512, 96, 16, 4, seed++));
    cases.push_back(moe_experts_case(Glu::SwiGLU, DType::BF16, 40, 128, 64, 4, 2, seed++));
    cases.push_back(moe_experts_case(Glu::SwiGLU, DType::BF16, 33, 512, 128, 32, 8, seed++));
    cases.push_back(moe_experts_case(Glu::SwiGLU, DType::F32, 2, 64, 44, 4, 2, seed++));
    cases.push_back(moe_experts_case(Glu::SwiGLU, DType::F32, 520, 64, 32, 8, 2, seed++));
    cases.push_back(moe_experts_case(Glu::SwiGLU, DType::BF16, 80, 320, 192, 8, 2, seed++));
    cases.push_back(moe_experts_case(Glu::GeGLU, DType::F16, 600, 256, 128, 16, 4, seed++));
    cases.push_back(moe_experts_case(Glu::SwiGLU, DType::BF16, 1030, 128, 64, 64, 8, seed++));
  } else if (op == "sample_rows") {
    for (int shape : {0, 1, 2}) {
      cases.push_back(sample_rows_case(1, 128256, shape, seed++));
      cases.push_back(sample_rows_case(8, 3000, shape, seed++));
      cases.push_back(sample_rows_case(40, 1000, shape, seed++));
    }
    cases.push_back(sample_rows_case(3, 7, 0, seed++));
    // Every kind of cut over a whole vocabulary, and masked (-inf) tokens.
    for (int shape : {1, 2, 3}) cases.push_back(sample_rows_case(8, 128256, shape, seed++));
    cases.push_back(sample_rows_case(40, 1000, 3, seed++));
    // More rows' sort segments than one sort call of the GPU's takes (256).
    cases.push_back(sample_rows_case(300, 1000, 1, seed++));
  } else if (op == "edit_logits") {
    cases.push_back(edit_logits_case(1, 7, 7, seed++));
    cases.push_back(edit_logits_case(4, 1000, 300, seed++));
    cases.push_back(edit_logits_case(64, 128256, 2000, seed++));
  } else if (op == "logprobs") {
    cases.push_back(logprobs_case(1, 7, 7, false, seed++));
    cases.push_back(logprobs_case(1, 128256, 0, false, seed++));
    cases.push_back(logprobs_case(1, 128256, 20, false, seed++));
    cases.push_back(logprobs_case(9, 3000, 5, true, seed++));
    cases.push_back(logprobs_case(64, 32000, 1, false, seed++));
    cases.push_back(logprobs_case(130, 1000, 0, true, seed++));
    // Over several of the GPU's chunks: ties across their ends, a chunk all -inf.
    cases.push_back(logprobs_case(3, 20000, 20, true, seed++));
    cases.push_back(logprobs_case(4, 9000, 8, false, seed++, true));
  } else if (op == "argmax_rows") {
    // Rows of whole 16-byte pieces (read a piece a load on the GPU), and rows of 1,003 (read a float a load).
    for (auto [R, N] : {std::pair{1, 1}, {1, 4096}, {3, 1000}, {2, 1003}, {64, 128256}})
      for (bool ties : {false, true}) cases.push_back(argmax_rows_case(R, N, ties, seed++));
  }
  return cases;
}

const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = {
      "embedding",   "rms_norm",    "add_rms_norm",  "linear_add_rms_norm",  "linear",
      "rope",        "store_kv",    "rope_store_kv", "linear_rope_store_kv", "normed_rope_store_kv",
      "attention",   "glu",         "linear_glu",    "normed_glu",           "linear_add",
      "softcap",     "add",         "gather_rows",   "scatter_add_rows",     "moe_route",
      "moe_experts", "argmax_rows", "sample_rows",   "edit_logits",          "logprobs"};
  return names;
}

}  // namespace tessera::test
