// A mixture of experts in place of a layer's MLP (Qwen3-MoE, Mixtral): a router's softmax over
// the experts picks each token's top k, whose gated MLPs' outputs, weighted by those
// probabilities (renormalised over the k where the config says so), are added to the residual
// stream. The routing is made on the host from the router's logits (a download a layer), so a
// forward with experts is not recorded for replay.
#pragma once
#include <array>
#include <string>
#include <vector>

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

 private:
  struct Expert {
    Tensor gate, up, down;
  };
  Backend& be_;
  MoeOptions o_;
  Glu glu_;
  Tensor router_;
  std::vector<Expert> experts_;
};

}  // namespace tessera::nn
