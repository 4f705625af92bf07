// A mixture of experts in place of a layer's MLP (Qwen3-MoE, Mixtral): a router's softmax over
// the experts picks each token's top k, whose gated MLPs' outputs, weighted by those
// probabilities (renormalised over the k where the config says so), are added to the residual
// stream: the router's product, then the backend's moe_route and moe_experts.
#pragma once
#include <array>
#include <string>

#include "backend/backend.h"
#include "io/safetensors.h"

namespace tessera::nn {

struct MoeOptions {
  int num_experts = 0;  // 0: no layer has experts
  int top_k = 0;
  int intermediate_size = 0;
  bool norm_topk_prob = true;
  std::vector<bool> sparse;  // per layer: experts instead of the dense MLP
  // Checkpoint names under model.layers.N.: the block, its router, and each expert's gate, up
  // and down projections (experts.E.<name>.weight).
  std::string block = "mlp", router = "gate";
  std::array<std::string, 3> projections = {"gate_proj", "up_proj", "down_proj"};
};

class MoeMlp {
 public:
  // prefix: "model.layers.N."; H: the hidden size.
  MoeMlp(const WeightStore& w, Backend& be, const std::string& prefix, const MoeOptions& o, int H, Glu glu);
  // x[T, H] += the experts' weighted outputs for the normed input h [T, H] (both f32).
  void add_to(const Tensor& h, Tensor& x);
  // Whether add_to() of up to `tokens` rows can be recorded for replay (Backend::can_record).
  bool recordable(int64_t tokens) const { return be_.moe_experts_recordable(experts_, tokens); }

 private:
  Backend& be_;
  MoeOptions o_;
  Glu glu_;
  Tensor router_;
  Experts experts_;
};

}  // namespace tessera::nn
