// The sampler as it was before the fast host path (commit ea64eae), kept verbatim as the
// oracle: tests/engine/test_sampler_equivalence.cpp requires sample() to return exactly what
// this returns, and bench/engine/bench_sampler times both.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "engine/sampler.h"

namespace tessera::reference {

inline std::vector<float> log_softmax(const float* logits, int n) {
  float mx = *std::max_element(logits, logits + n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - mx);
  double lse = mx + std::log(sum);
  std::vector<float> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[i] = float(double(logits[i]) - lse);
  return out;
}

inline void apply_penalties(std::vector<float>& l, const SamplingParams& p, const std::vector<int32_t>& tokens,
                            int num_prompt) {
  int V = int(l.size());
  if (p.repetition_penalty != 1.0f) {
    std::vector<char> seen(size_t(V), 0);
    for (int32_t t : tokens)
      if (t >= 0 && t < V) seen[t] = 1;
    for (int i = 0; i < V; ++i)
      if (seen[i]) l[i] = l[i] > 0 ? l[i] / p.repetition_penalty : l[i] * p.repetition_penalty;
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int> counts;
    for (size_t i = size_t(num_prompt); i < tokens.size(); ++i) counts[tokens[i]]++;
    for (auto [t, c] : counts)
      if (t >= 0 && t < V) l[t] -= p.presence_penalty + p.frequency_penalty * float(c);
  }
  for (auto [t, b] : p.logit_bias)
    if (t >= 0 && t < V) l[t] += b;
}

inline SampleResult sample(const float* logits, int V, const SamplingParams& p, const std::vector<int32_t>& tokens,
                           int num_prompt, Rng& rng) {
  std::vector<float> l(logits, logits + V);
  apply_penalties(l, p, tokens, num_prompt);

  SampleResult r;
  if (p.temperature <= 0.0f) {
    r.token = int32_t(std::max_element(l.begin(), l.end()) - l.begin());  // first maximum on ties
  } else {
    for (float& x : l) x /= p.temperature;
    // Candidates, most likely first; top-k keeps only k of them.
    std::vector<int32_t> idx(static_cast<size_t>(V));
    std::iota(idx.begin(), idx.end(), 0);
    int k = (p.top_k > 0 && p.top_k < V) ? p.top_k : V;
    auto by_logit = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
    if (k < V || p.top_p < 1.0f) {
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), by_logit);
      idx.resize(size_t(k));
    }
    float mx = *std::max_element(l.begin(), l.end());
    std::vector<double> probs(idx.size());
    double sum = 0;
    for (size_t i = 0; i < idx.size(); ++i) sum += probs[i] = std::exp(double(l[idx[i]]) - mx);
    for (double& q : probs) q /= sum;
    size_t keep = idx.size();
    if (p.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p (at least one token)
      double cum = 0;
      for (keep = 0; keep < idx.size();) {
        cum += probs[keep++];
        if (cum >= p.top_p) break;
      }
    }
    if (p.min_p > 0.0f) {  // drop tokens below min_p times the most likely one
      double top = *std::max_element(probs.begin(), probs.begin() + keep);
      size_t j = 0;
      for (size_t i = 0; i < keep; ++i)
        if (probs[i] >= p.min_p * top) idx[j] = idx[i], probs[j++] = probs[i];
      keep = j;
    }
    double mass = std::accumulate(probs.begin(), probs.begin() + keep, 0.0);
    double u = std::uniform_real_distribution<double>(0.0, mass)(rng);
    size_t pick = keep - 1;
    for (size_t i = 0; i < keep; ++i) {
      if (u < probs[i]) {
        pick = i;
        break;
      }
      u -= probs[i];
    }
    r.token = idx[pick];
  }

  if (p.logprobs >= 0) {
    std::vector<float> lp = log_softmax(logits, V);
    r.logprob = lp[r.token];
    int n = std::min(p.logprobs, V);
    std::vector<int32_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + n, order.end(),
                      [&](int32_t a, int32_t b) { return lp[a] > lp[b] || (lp[a] == lp[b] && a < b); });
    for (int i = 0; i < n; ++i) r.top.emplace_back(order[i], lp[order[i]]);
  }
  return r;
}

}  // namespace tessera::reference
