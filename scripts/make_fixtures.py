#!/usr/bin/env python3
"""Writes the tiny random-weight checkpoints the engine's golden tests use, with transformers'
own save_pretrained, plus transformers' greedy continuations and top-5 logprobs for a few prompts.

Runs where PyTorch 2.11 and transformers 5.17 are installed (a GPU machine; the CPU is used for
the references so that they are f32-exact):
    python3 scripts/make_fixtures.py OUT_DIR [NAME ...]
(all variants, or the named ones) and the result is committed as tests/fixtures/models/.
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

COMMON = dict(
    hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=2, vocab_size=384, max_position_embeddings=256, rms_norm_eps=1e-5,
    initializer_range=0.15, bos_token_id=1, eos_token_id=2, pad_token_id=0,
)

# name -> (model_type, extra config, weight dtype, save kwargs)
VARIANTS = {
    "llama": ("llama", dict(tie_word_embeddings=True,
                            rope_parameters=dict(rope_type="llama3", rope_theta=10000.0, factor=8.0,
                                                 low_freq_factor=1.0, high_freq_factor=4.0,
                                                 original_max_position_embeddings=32)),
              torch.float32, {}),
    "llama_bf16": ("llama", dict(tie_word_embeddings=False, rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=2.0)),
                   torch.bfloat16, {}),
    "llama_f16": ("llama", dict(tie_word_embeddings=False), torch.float16, {}),
    "llama_dynamic": ("llama", dict(tie_word_embeddings=True, max_position_embeddings=48,
                                    rope_parameters=dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0)),
                      torch.float32, {}),
    "mistral": ("mistral", dict(tie_word_embeddings=False, sliding_window=16, head_dim=16), torch.float32, {}),
    "qwen2": ("qwen2", dict(tie_word_embeddings=True,
                            rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                                 original_max_position_embeddings=32)),
              torch.float32, dict(max_shard_size="150KB")),
    "qwen3": ("qwen3", dict(tie_word_embeddings=False, head_dim=24, attention_bias=False), torch.float32, {}),
    # Gemma 2: GeGLU (gelu's tanh form), norms before and after each sublayer with weights as 1 + w,
    # embeddings scaled by sqrt(hidden), attention scaled by query_pre_attn_scalar and soft-capped,
    # sliding-window layers alternating with full ones, soft-capped final logits. Caps small
    # enough that tanh bends these random weights' scores and logits.
    "gemma2": ("gemma2", dict(tie_word_embeddings=True, head_dim=16, query_pre_attn_scalar=24, sliding_window=8,
                              attn_logit_softcapping=6.0, final_logit_softcapping=4.0,
                              hidden_activation="gelu_pytorch_tanh"),
               torch.float32, {}),
    # Gemma 3 (text): Gemma 2's layout with q/k norms instead of soft caps, and its own RoPE per
    # layer type (here linear scaling on the full-attention layers, a lower base on the others).
    "gemma3": ("gemma3_text", dict(tie_word_embeddings=True, head_dim=16, query_pre_attn_scalar=24, sliding_window=8,
                                   layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                                   rope_parameters=dict(
                                       full_attention=dict(rope_type="linear", rope_theta=100000.0, factor=2.0),
                                       sliding_attention=dict(rope_type="default", rope_theta=10000.0)),
                                   hidden_activation="gelu_pytorch_tanh"),
               torch.float32, {}),
    # Phi-3 / Phi-4: q/k/v and gate/up each one stacked tensor; partial rotary (Phi-4-mini's
    # 0.75) and longrope, its short factors up to the 32-token pretrained length, long past it
    # (the second prompt crosses it while generating, the third starts past it).
    "phi3": ("phi3", dict(tie_word_embeddings=True, partial_rotary_factor=0.75, original_max_position_embeddings=32,
                          rope_parameters=dict(rope_type="longrope", rope_theta=10000.0,
                                               short_factor=[1.0 + 0.05 * i for i in range(6)],
                                               long_factor=[1.0 + 0.9 * i for i in range(6)])),
             torch.float32, {}),
    # Mixture of experts: a router's softmax, the top experts' gated MLPs weighted by it. Qwen3-MoE
    # with the top weights renormalised and one dense layer between sparse ones; Mixtral with its
    # experts' w1 / w3 / w2.
    "qwen3_moe": ("qwen3_moe", dict(tie_word_embeddings=False, head_dim=16, num_experts=8, num_experts_per_tok=3,
                                    moe_intermediate_size=48, norm_topk_prob=True, decoder_sparse_step=1,
                                    mlp_only_layers=[1]),
                  torch.float32, {}),
    # The 16-bit one with experts 64 wide, as wide as the hidden size: the CUDA backend's tensor-core
    # expert tiles take multiples of 64, so its prompts of 8 tokens or more run on them.
    "qwen3_moe_bf16": ("qwen3_moe", dict(tie_word_embeddings=False, head_dim=16, num_experts=8, num_experts_per_tok=3,
                                         moe_intermediate_size=64, norm_topk_prob=True),
                       torch.bfloat16, {}),
    "mixtral": ("mixtral", dict(tie_word_embeddings=False, num_local_experts=4, num_experts_per_tok=2),
                torch.float32, {}),
}

PROMPTS = [[1, 17, 200, 45, 99], list(range(3, 60, 2)), [1] + [(i * 37) % 380 + 3 for i in range(44)]]
NEW_TOKENS = 24


def main(out, names):
    os.makedirs(out, exist_ok=True)
    print("torch", torch.__version__, "transformers", transformers.__version__, flush=True)
    for name, (mtype, extra, dtype, save_kw) in VARIANTS.items():
        if names and name not in names:
            continue
        torch.manual_seed(1234)
        cfg = AutoConfig.for_model(mtype, **{**COMMON, **extra})
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        # 16-bit experts: routers 8x sharper than the initialiser makes them, so that a token's top
        # experts stand apart and a GPU's 16-bit activations do not swap two of nearly equal
        # probability (tests/cuda compares its logits with the CPU's f32 ones).
        if dtype != torch.float32:
            with torch.no_grad():
                for pname, param in model.named_parameters():
                    if pname.endswith((".mlp.gate.weight", ".block_sparse_moe.gate.weight")):
                        param.mul_(8.0)
        model = model.to(dtype).eval()
        d = os.path.join(out, name)
        model.save_pretrained(d, safe_serialization=True, **save_kw)
        model.generation_config.save_pretrained(d)
        # Reference: reload the saved checkpoint and compute in f32. Gemma 2 with eager attention:
        # transformers' default (sdpa) leaves its attention soft-capping out.
        ref_kw = dict(attn_implementation="eager") if mtype == "gemma2" else {}
        ref = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, **ref_kw).eval()
        cases = []
        min_margin = 1e9
        for prompt in PROMPTS:
            ids = torch.tensor([prompt])
            with torch.no_grad():
                g = ref.generate(ids, do_sample=False, max_new_tokens=NEW_TOKENS, output_logits=True,
                                 return_dict_in_generate=True, attention_mask=torch.ones_like(ids))
            new = g.sequences[0, len(prompt):].tolist()
            steps = []
            for logits in g.logits:
                lp = torch.log_softmax(logits[0].double(), -1)
                top = torch.topk(lp, 5)
                min_margin = min(min_margin, float(top.values[0] - top.values[1]))
                steps.append([[int(i), float(v)] for v, i in zip(top.values, top.indices)])
            cases.append({"prompt": prompt, "generated": new, "top5": steps})
        with open(os.path.join(d, "reference.json"), "w") as f:
            json.dump({"generator": f"transformers {transformers.__version__} generate(do_sample=False), f32 on CPU",
                       "cases": cases}, f)
        size = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d))
        print(f"{name}: {size/1e6:.2f} MB, min top1-top2 margin {min_margin:.4f}, "
              f"lengths {[len(c['generated']) for c in cases]}", flush=True)
        print(open(os.path.join(d, "config.json")).read(), flush=True)



if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
