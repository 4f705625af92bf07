#include "nn/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tessera::nn {

MoeMlp::MoeMlp(const WeightStore& w, Backend& be, const std::string& prefix, const MoeOptions& o, int H, Glu glu)
    : be_(be), o_(o), glu_(glu) {
  TESSERA_CHECK(o.num_experts > 0 && o.top_k > 0 && o.top_k <= o.num_experts && o.intermediate_size > 0,
                "config.json: experts need num_experts >= experts per token > 0 and an intermediate size");
  const std::string block = prefix + o.block + ".";
  router_ = be.upload(w.get(block + o.router + ".weight", {o.num_experts, H}));
  const int I = o.intermediate_size;
  for (int e = 0; e < o.num_experts; ++e) {
    const std::string p = block + "experts." + std::to_string(e) + ".";
    // gate and up uploaded together, so that a backend may run them as one product
    std::vector<Tensor> gate_up = be.upload_group({w.get(p + o.projections[0] + ".weight", {I, H}),
                                                   w.get(p + o.projections[1] + ".weight", {I, H})});
    experts_.push_back({gate_up[0], gate_up[1], be.upload(w.get(p + o.projections[2] + ".weight", {H, I}))});
  }
}

void MoeMlp::add_to(const Tensor& h, Tensor& x) {
  const int64_t T = h.dim(0), H = h.dim(1), E = o_.num_experts, k = o_.top_k, I = o_.intermediate_size;
  if (T == 0) return;
  Tensor logits = be_.empty(DType::F32, {T, E});
  be_.linear(h, router_, Tensor(), logits);
  std::vector<float> host(size_t(T * E));
  be_.download(logits, host.data());

  // Each token's top k by the softmax (in f32, as transformers computes it; ties to the lower
  // expert), grouped by expert: rows[e] the tokens, weights[e] their probabilities.
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(E));
  std::vector<std::vector<float>> weights(static_cast<size_t>(E));
  std::vector<int> order(static_cast<size_t>(E));
  std::vector<float> p(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = host.data() + t * E;
    const float mx = *std::max_element(l, l + E);
    float sum = 0.0f;
    for (int64_t e = 0; e < E; ++e) sum += p[size_t(e)] = std::exp(l[e] - mx);
    for (float& v : p) v /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return p[size_t(a)] > p[size_t(b)] || (p[size_t(a)] == p[size_t(b)] && a < b); });
    float top = 0.0f;
    for (int64_t j = 0; j < k; ++j) top += p[size_t(order[size_t(j)])];
    for (int64_t j = 0; j < k; ++j) {
      const int e = order[size_t(j)];
      rows[size_t(e)].push_back(int32_t(t));
      weights[size_t(e)].push_back(o_.norm_topk_prob ? p[size_t(e)] / top : p[size_t(e)]);
    }
  }
  // One upload of every expert's rows and weights, in expert order.
  Tensor all_rows = Tensor::empty(DType::I32, {T * k}), all_weights = Tensor::empty(DType::F32, {T * k});
  std::vector<int64_t> begin(size_t(E) + 1, 0);
  for (int64_t e = 0; e < E; ++e) {
    std::copy(rows[size_t(e)].begin(), rows[size_t(e)].end(), all_rows.data<int32_t>() + begin[size_t(e)]);
    std::copy(weights[size_t(e)].begin(), weights[size_t(e)].end(), all_weights.data<float>() + begin[size_t(e)]);
    begin[size_t(e) + 1] = begin[size_t(e)] + int64_t(rows[size_t(e)].size());
  }
  const Tensor dev_rows = be_.upload(all_rows), dev_weights = be_.upload(all_weights);

  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = begin[size_t(e) + 1] - begin[size_t(e)];
    if (n == 0) continue;
    const Tensor r = dev_rows.slice_rows(begin[size_t(e)], begin[size_t(e) + 1]);
    const Expert& X = experts_[size_t(e)];
    Tensor in = be_.empty(DType::F32, {n, H}), gate = be_.empty(DType::F32, {n, I});
    Tensor up = be_.empty(DType::F32, {n, I}), out = be_.empty(DType::F32, {n, H});
    be_.gather_rows(h, r, in);
    be_.linear_glu(glu_, in, {X.gate, Tensor(), gate}, {X.up, Tensor(), up}, gate);
    be_.linear(gate, X.down, Tensor(), out);
    be_.scatter_add_rows(out, r, dev_weights.slice_rows(begin[size_t(e)], begin[size_t(e) + 1]), x);
  }
}

}  // namespace tessera::nn
