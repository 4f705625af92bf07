#include "nn/moe.h"

namespace tessera::nn {

MoeMlp::MoeMlp(const WeightStore& w, Backend& be, const std::string& prefix, const MoeOptions& o, int H, Glu glu)
    : be_(be), o_(o), glu_(glu) {
  TESSERA_CHECK(o.num_experts > 0 && o.top_k > 0 && o.top_k <= o.num_experts && o.intermediate_size > 0,
                "config.json: experts need num_experts >= experts per token > 0 and an intermediate size");
  const std::string block = prefix + o.block + ".";
  router_ = be.upload(w.get(block + o.router + ".weight", {o.num_experts, H}));
  const int I = o.intermediate_size;
  std::vector<Tensor> gate, up, down;
  // mlx-lm's checkpoints stack each projection's experts in one tensor, [experts, out, in], under
  // switch_mlp with the gate_proj / up_proj / down_proj names; the hub's keep one per expert.
  const std::string stacked = block + "switch_mlp.";
  if (w.has(stacked + "gate_proj.weight")) {
    const int64_t E = o.num_experts;
    const Tensor g = w.get(stacked + "gate_proj.weight", {E, I, H}),
                 u = w.get(stacked + "up_proj.weight", {E, I, H});
    const Tensor d = w.get(stacked + "down_proj.weight", {E, H, I});
    for (int64_t e = 0; e < E; ++e) {
      gate.push_back(g.slice_rows(e, e + 1).reshape({I, H}));
      up.push_back(u.slice_rows(e, e + 1).reshape({I, H}));
      down.push_back(d.slice_rows(e, e + 1).reshape({H, I}));
    }
  } else {
    for (int e = 0; e < o.num_experts; ++e) {
      const std::string p = block + "experts." + std::to_string(e) + ".";
      gate.push_back(w.get(p + o.projections[0] + ".weight", {I, H}));
      up.push_back(w.get(p + o.projections[1] + ".weight", {I, H}));
      down.push_back(w.get(p + o.projections[2] + ".weight", {H, I}));
    }
  }
  experts_ = be.upload_experts(gate, up, down);
}

void MoeMlp::add_to(const Tensor& h, Tensor& x) {
  const int64_t T = h.dim(0), E = o_.num_experts, k = o_.top_k;
  if (T == 0) return;
  Tensor logits = be_.empty(DType::F32, {T, E}), ids = be_.empty(DType::I32, {T, k});
  Tensor weights = be_.empty(DType::F32, {T, k});
  be_.linear(h, router_, Tensor(), logits);
  be_.moe_route(logits, int(k), o_.norm_topk_prob, ids, weights);
  be_.moe_experts(glu_, h, ids, weights, experts_, x);
}

}  // namespace tessera::nn
