#include "engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>

namespace tessera {

// Everything here returns bit for bit what the straightforward version returned (kept as the
// oracle in tests/engine/sampler_reference.h): the same floating-point operations on the
// same values in the same order. What changes is which values are touched: each sequence's
// row is V = 128k floats, sampled once per step, so the work avoids sorting, copying or
// exponentiating the whole row where the result cannot depend on it.

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The draw's uniform in [0, 1): uniform_real_distribution<double>(0, mass) is mass times this.
double canonical(Rng& rng) { return std::generate_canonical<double, std::numeric_limits<double>::digits>(rng); }

// Per-thread buffers: every call of a step has the same vocabulary, so after the first call
// sampling allocates nothing V-sized.
struct Scratch {
  std::vector<float> row;                 // penalised and/or temperature-scaled logits
  std::vector<float> logprobs;            // log_softmax of the model's row (for the top-N list)
  std::vector<uint64_t> keys, keys_tmp;   // candidates as rank keys, and the radix sort's buffer
  std::vector<int32_t> ids;               // candidates, in sampling order
  std::vector<double> probs;              // their exp(logit - max), then probabilities
  std::vector<int32_t> history;           // penalties: the sequence's tokens, sorted
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// The value *std::max_element returns (NaN only if x[0] is NaN), with eight running maxima so
// the loop vectorises. Only the sign of a zero maximum can differ, and no caller can see it.
float row_max(const float* x, int n) {
  float m[8];
  std::fill(m, m + 8, x[0]);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  for (int j = 1; j < 8; ++j) m[0] = m[j] > m[0] ? m[j] : m[0];
  return m[0];
}

// std::max_element's index: the first maximum.
int32_t argmax(const float* x, int n) {
  float mx = row_max(x, n);
  for (int i = 0; i < n; ++i)
    if (x[i] == mx) return i;
  return 0;  // NaN first element: max_element never moves past it
}

// A candidate as one integer whose ascending order is the sampler's order: larger value
// first, then lower id. -0 and +0 compare equal as floats, so they share a key.
uint64_t rank_key(float v, int32_t id) {
  uint32_t b = std::bit_cast<uint32_t>(v + 0.0f);                // -0 -> +0
  uint32_t ascending = (b & 0x80000000u) ? ~b : b | 0x80000000u;  // grows with v
  return uint64_t(~ascending) << 32 | uint32_t(id);
}

int32_t key_id(uint64_t key) { return int32_t(uint32_t(key)); }

// Sorts keys, best first. Large arrays take an LSD radix sort over the four value bytes
// (fastest here of 8-, 11- and 16-bit digits); it is stable, so keys of equal value must
// arrive in id order (a scan of the row gives that).
void sort_keys(std::vector<uint64_t>& keys, std::vector<uint64_t>& tmp) {
  if (keys.size() < 2048) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  size_t count[4][256] = {};
  for (uint64_t k : keys)
    for (int d = 0; d < 4; ++d) count[d][(k >> (32 + 8 * d)) & 255]++;
  tmp.resize(keys.size());
  for (int d = 0; d < 4; ++d) {
    if (count[d][(keys[0] >> (32 + 8 * d)) & 255] == keys.size()) continue;  // one digit: nothing moves
    size_t offset[256];
    for (size_t b = 0, sum = 0; b < 256; ++b) offset[b] = sum, sum += count[d][b];
    for (uint64_t k : keys) tmp[offset[(k >> (32 + 8 * d)) & 255]++] = k;
    keys.swap(tmp);
  }
}

// The m best candidates of a row (1 <= m <= n) into s.keys, best first.
void best_keys(const float* v, int n, size_t m, Scratch& s) {
  auto& keys = s.keys;
  keys.clear();
  if (m * 4 >= size_t(n)) {  // most of the row: sort all of it
    for (int i = 0; i < n; ++i) keys.push_back(rank_key(v[i], i));
    sort_keys(keys, s.keys_tmp);
    keys.resize(m);
    return;
  }
  // One scan keeping the best m so far in a buffer of up to 2m, trimmed when full. After a
  // trim only keys below the m-th best can still make it; the float test rejects most values
  // before their key is built.
  uint64_t bound = ~uint64_t(0);
  float bound_value = -kInf;
  for (int i = 0; i < n; ++i) {
    if (v[i] < bound_value) continue;
    uint64_t k = rank_key(v[i], i);
    if (k >= bound) continue;
    keys.push_back(k);
    if (keys.size() == 2 * m) {
      std::nth_element(keys.begin(), keys.begin() + std::ptrdiff_t(m - 1), keys.end());
      keys.resize(m);
      bound = keys[m - 1];
      bound_value = v[key_id(bound)];
    }
  }
  if (keys.size() > m) {
    std::nth_element(keys.begin(), keys.begin() + std::ptrdiff_t(m - 1), keys.end());
    keys.resize(m);
  }
  std::sort(keys.begin(), keys.end());
}

// Every candidate whose value is at least `floor` into s.keys, best first: a prefix of the
// whole row's order. Returns the largest value left out (-inf if none).
float keys_at_least(const float* v, int n, float floor, Scratch& s) {
  auto& keys = s.keys;
  keys.resize(size_t(n));
  size_t m = 0;
  float rest = -kInf;
  for (int i = 0; i < n; ++i) {  // branch-free: about half the values pass, in no pattern
    keys[m] = rank_key(v[i], i);
    bool in = v[i] >= floor;
    m += in;
    rest = !in && v[i] > rest ? v[i] : rest;
  }
  keys.resize(m);
  sort_keys(keys, s.keys_tmp);
  return rest;
}

// Candidates (from s.keys) and their exp(v - mx) into s.ids and s.probs; returns the sum of
// those terms added in candidate order, as the reference adds them (the order shows in the
// last bits).
double exp_terms_of_keys(const float* v, float mx, Scratch& s) {
  size_t m = s.keys.size();
  s.ids.resize(m);
  s.probs.resize(m);
  double sum = 0;
  for (size_t i = 0; i < m; ++i) {
    int32_t id = key_id(s.keys[i]);
    s.ids[i] = id;
    sum += s.probs[i] = std::exp(double(v[id]) - mx);
  }
  return sum;
}

void normalise(std::vector<double>& probs, double sum) {
  for (double& q : probs) q /= sum;
}

// The smallest prefix whose mass reaches top_p (at least one token); all n if none does.
size_t nucleus(const std::vector<double>& probs, float top_p, bool& reached) {
  double cum = 0;
  size_t keep = 0;
  reached = false;
  while (keep < probs.size()) {
    cum += probs[keep++];
    if (cum >= top_p) {
      reached = true;
      break;
    }
  }
  return keep;
}

// Top-p over the whole vocabulary. The reference adds all V terms, largest first, and every
// term below half an ulp of the running sum leaves it unchanged — so do all smaller ones after
// it, and the sum is >= 1 from the first term (exp(0)). So only the tokens within 38 of the
// maximum are sorted and exponentiated (e^-38 < 2^-54: twice such a term is below half an ulp
// of 1), then checked: twice the largest term left out must not change the sum (twice, in
// case exp is not monotonic in the last bit). If it does, or the nucleus reaches past the
// sorted tokens, everything is sorted. Returns how many of s.ids/s.probs the nucleus keeps.
size_t whole_vocab_nucleus(const float* v, int V, float mx, float top_p, Scratch& s) {
  for (float floor : {mx - 38.0f, -kInf}) {
    float rest = keys_at_least(v, V, floor, s);
    bool all = floor == -kInf || s.keys.size() == size_t(V);
    double sum = exp_terms_of_keys(v, mx, s);
    if (!all && sum + 2 * std::exp(double(rest) - mx) != sum) continue;
    normalise(s.probs, sum);
    bool reached;
    size_t keep = nucleus(s.probs, top_p, reached);
    if (reached || all) return keep;
  }
  return 0;  // not reached: the second pass takes every token
}

// Draws a token from the scaled row v (logits / temperature) as the reference does: the
// candidates (every token in id order, or the top-k best first), their probabilities
// normalised over the candidates, top-p and min-p cuts, one uniform draw.
int32_t draw(const float* v, int V, const SamplingParams& p, Rng& rng, Scratch& s) {
  float mx = row_max(v, V);
  int k = (p.top_k > 0 && p.top_k < V) ? p.top_k : V;
  auto& ids = s.ids;
  auto& probs = s.probs;
  size_t keep;
  if (k < V) {
    best_keys(v, V, size_t(k), s);
    normalise(probs, exp_terms_of_keys(v, mx, s));
    bool reached;
    keep = p.top_p < 1.0f ? nucleus(probs, p.top_p, reached) : probs.size();
  } else if (p.top_p < 1.0f) {
    keep = whole_vocab_nucleus(v, V, mx, p.top_p, s);
  } else {  // every token, in id order
    ids.resize(size_t(V));
    std::iota(ids.begin(), ids.end(), 0);
    probs.resize(size_t(V));
    double sum = 0;
    for (int i = 0; i < V; ++i) sum += probs[i] = std::exp(double(v[i]) - mx);
    normalise(probs, sum);
    keep = probs.size();
  }

  if (p.min_p > 0.0f) {  // drop tokens below min_p times the most likely one
    double top = *std::max_element(probs.begin(), probs.begin() + std::ptrdiff_t(keep));
    size_t j = 0;
    for (size_t i = 0; i < keep; ++i)
      if (probs[i] >= p.min_p * top) ids[j] = ids[i], probs[j++] = probs[i];
    keep = j;
  }
  double mass = std::accumulate(probs.begin(), probs.begin() + std::ptrdiff_t(keep), 0.0);
  double u = mass * canonical(rng);
  // Rounding can leave u past the last token: then the last with a chance (a masked token has none).
  size_t pick = keep - 1;
  while (pick > 0 && probs[pick] == 0.0) --pick;
  for (size_t i = 0; i < keep; ++i) {
    if (u < probs[i]) {
      pick = i;
      break;
    }
    u -= probs[i];
  }
  return ids[pick];
}

// What the presence and frequency penalties take from a token seen `count` times in the output.
float count_penalty(const SamplingParams& p, int count) {
  return p.presence_penalty + p.frequency_penalty * float(count);
}

// The row with penalties and logit bias applied, copied into s.row. Only the sequence's
// tokens and the biased ones change, each by the same float operations in the same order as
// before; sorting the history replaces a V-sized "seen" array and a hash map of counts.
float* penalised_row(const float* logits, int V, const SamplingParams& p, const std::vector<int32_t>& tokens,
                     int num_prompt, Scratch& s) {
  s.row.assign(logits, logits + V);
  float* l = s.row.data();
  auto& h = s.history;
  if (p.repetition_penalty != 1.0f) {  // once per distinct token, prompt or output
    h.clear();
    for (int32_t t : tokens)
      if (t >= 0 && t < V) h.push_back(t);
    std::sort(h.begin(), h.end());
    h.erase(std::unique(h.begin(), h.end()), h.end());
    for (int32_t t : h) l[t] = l[t] > 0 ? l[t] / p.repetition_penalty : l[t] * p.repetition_penalty;
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {  // per output token, by its count
    size_t first = std::min(size_t(num_prompt), tokens.size());  // a negative count: no output tokens
    h.assign(tokens.begin() + std::ptrdiff_t(first), tokens.end());
    std::sort(h.begin(), h.end());
    for (size_t i = 0, j; i < h.size(); i = j) {
      for (j = i; j < h.size() && h[j] == h[i];) ++j;
      int32_t t = h[i];
      int c = int(j - i);
      if (t >= 0 && t < V) l[t] -= count_penalty(p, c);
    }
  }
  for (auto [t, b] : p.logit_bias)
    if (t >= 0 && t < V) l[t] += b;
  return l;
}

// log_softmax's normaliser: max + log(sum of exp(x - max)), the sum in double in id order.
double log_sum_exp(const float* x, int n) {
  float mx = row_max(x, n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(double(x[i]) - mx);
  return mx + std::log(sum);
}

// The sampled token's logprob and the n most likely tokens (larger logprob first, lower id on
// ties — ties the float rounding of logprobs can create between different logits).
void add_logprobs(const float* logits, int V, int n, SampleResult& r, Scratch& s) {
  double lse = log_sum_exp(logits, V);
  r.logprob = float(double(logits[r.token]) - lse);
  if (n <= 0) return;
  auto& lp = s.logprobs;
  lp.resize(size_t(V));
  for (int i = 0; i < V; ++i) lp[i] = float(double(logits[i]) - lse);
  if (!std::isfinite(lse)) {  // all -inf or an +inf logit: NaN logprobs, ordered as std::partial_sort leaves them
    auto& order = s.ids;
    order.resize(size_t(V));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + n, order.end(),
                      [&](int32_t a, int32_t b) { return lp[a] > lp[b] || (lp[a] == lp[b] && a < b); });
    for (int i = 0; i < n; ++i) r.top.emplace_back(order[i], lp[order[i]]);
    return;
  }
  best_keys(lp.data(), V, size_t(n), s);
  r.top.reserve(size_t(n));
  for (uint64_t k : s.keys) r.top.emplace_back(key_id(k), lp[key_id(k)]);
}

}  // namespace

std::vector<int32_t> best_ids(const float* logits, int n, int k) {
  Scratch& s = scratch();
  std::vector<int32_t> out;
  if (n <= 0 || k <= 0) return out;
  best_keys(logits, n, size_t(std::min(k, n)), s);
  for (uint64_t key : s.keys) out.push_back(key_id(key));
  return out;
}

std::vector<float> log_softmax(const float* logits, int n) {
  double lse = log_sum_exp(logits, n);
  std::vector<float> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[i] = float(double(logits[i]) - lse);
  return out;
}

bool has_penalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f ||
         !p.logit_bias.empty();
}

bool is_backend_drawable(const SamplingParams& p) {
  if (p.logprobs > kMaxBackendLogprobs) return false;
  std::vector<int32_t> biased;
  for (auto [t, b] : p.logit_bias) biased.push_back(t);
  std::sort(biased.begin(), biased.end());
  return std::adjacent_find(biased.begin(), biased.end()) == biased.end();
}

void append_logit_edits(const SamplingParams& p, const std::vector<int32_t>& tokens, int num_prompt, int V,
                        int32_t row, std::vector<LogitEdit>& out) {
  auto outside = [V](int32_t t) { return t < 0 || t >= V; };
  std::vector<int32_t> seen, generated;  // sorted: every distinct token (repetition), output tokens (counts)
  if (p.repetition_penalty != 1.0f) {
    seen = tokens;
    std::erase_if(seen, outside);
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    const size_t first = std::min(size_t(std::max(num_prompt, 0)), tokens.size());
    generated.assign(tokens.begin() + std::ptrdiff_t(first), tokens.end());
    std::erase_if(generated, outside);
    std::sort(generated.begin(), generated.end());
  }
  const size_t begin = out.size();
  for (size_t i = 0, j = 0; i < seen.size() || j < generated.size();) {
    const int32_t t = j == generated.size() || (i < seen.size() && seen[i] <= generated[j]) ? seen[i] : generated[j];
    LogitEdit e{row, t};
    if (i < seen.size() && seen[i] == t) e.ops |= LogitEdit::kRepetition, e.repetition = p.repetition_penalty, ++i;
    const size_t k = j;
    while (j < generated.size() && generated[j] == t) ++j;
    if (j > k) e.ops |= LogitEdit::kSubtract, e.subtract = count_penalty(p, int(j - k));
    out.push_back(e);
  }
  // The bias of a token already edited joins its edit (the penalised edits are sorted by token).
  const size_t penalised = out.size();
  for (auto [t, b] : p.logit_bias) {
    if (outside(t)) continue;
    auto it = std::lower_bound(out.begin() + std::ptrdiff_t(begin), out.begin() + std::ptrdiff_t(penalised), t,
                               [](const LogitEdit& e, int32_t token) { return e.token < token; });
    if (it == out.begin() + std::ptrdiff_t(penalised) || it->token != t) {
      out.push_back({row, t});
      it = out.end() - 1;
    }
    it->ops |= LogitEdit::kAdd, it->add = b;
  }
}

RowSampling backend_draw(const SamplingParams& p, Rng& rng) {
  RowSampling d{p.temperature, p.top_k, p.top_p, p.min_p, 0.0};
  if (p.temperature > 0.0f) d.u = canonical(rng);  // as draw() takes it
  return d;
}

bool is_plain_argmax(const SamplingParams& p) {
  return p.temperature <= 0.0f && p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f &&
         p.frequency_penalty == 0.0f && p.logit_bias.empty() && p.logprobs < 0;
}

SampleResult sample(const float* logits, int V, const SamplingParams& p, const std::vector<int32_t>& tokens,
                    int num_prompt, Rng& rng, const uint8_t* allowed) {
  Scratch& s = scratch();
  // The row the choice is made on; the model's own row stays for the logprobs.
  const float* l = logits;
  float* own = nullptr;  // a scratch copy, once penalties, a mask or a temperature change the values
  if (has_penalties(p)) l = own = penalised_row(logits, V, p, tokens, num_prompt, s);
  if (allowed) {
    if (!own) s.row.assign(logits, logits + V), own = s.row.data();
    for (int i = 0; i < V; ++i)
      if (!allowed[i]) own[i] = -kInf;
    l = own;
  }

  SampleResult r;
  if (p.temperature <= 0.0f) {
    r.token = argmax(l, V);
  } else {
    if (p.temperature != 1.0f) {  // x / 1 is x: the default temperature needs no copy
      if (!own) s.row.resize(size_t(V)), own = s.row.data();
      const float t = p.temperature;  // a local: it could alias the row, which would stop vectorisation
      for (int i = 0; i < V; ++i) own[i] = l[i] / t;
      l = own;
    }
    r.token = draw(l, V, p, rng, s);
  }
  if (p.logprobs >= 0) add_logprobs(logits, V, std::min(p.logprobs, V), r, s);
  return r;
}

}  // namespace tessera
