#!/usr/bin/env python3
"""Golden fixtures for the architectures beyond make_golden.py's: BLOOM, Llama with scaled rotary embedding, Qwen3.

Writes, under --out (default src/test/resources/golden):

  bloom/              BloomForCausalLM: vocab 160, hidden 48, 6 heads (head size 8; 6 is not a power of two, so
                      both of BLOOM's ALiBi slope rules are used), 2 layers, tied embeddings
  llama3-rope/        LlamaForCausalLM with rope_type llama3 (theta 100, factor 8, low/high freq factors 1/4,
                      original_max_position_embeddings 64: of the 4 frequencies, one is kept, two are interpolated
                      and one is divided by the factor), untied; also inv_freq.json (below)
  llama-linear-rope/  LlamaForCausalLM with rope_type linear (factor 4, theta 1e4), tied embeddings
  qwen3/              Qwen3ForCausalLM: q_norm and k_norm (an RMSNorm of each query and key head, before rope), head_dim
                      16 with hidden 32 and 4 heads (q width 64: head_dim is not hidden / heads), no biases, tied
                      embeddings, theta 1e6
  phi3/               Phi3ForCausalLM: fused qkv_proj and gate_up_proj, 4 heads / 2 kv heads, rope_type longrope
                      (short and long factors, original_max_position_embeddings 8 < the batch's 16 tokens: the long
                      factors and an attention factor of sqrt(2)), sliding_window 6, untied
  gemma3/             Gemma3ForCausalLM (text): embeddings times sqrt(hidden), RMSNorms with (1 + w), q_norm and k_norm,
                      query_pre_attn_scalar 12 (not head_dim 16), GELU-tanh gated MLP, the four norms around attention
                      and MLP, layers sliding (window 5, local rope theta 1e4) and full (theta 1e6 with linear
                      scaling 4) as layer_types [sliding, sliding, full], tied embeddings, pad_token_id 0 (the
                      embedding's padding_idx: no gradient from looking up token 0)
  gemma2/             Gemma2ForCausalLM: Gemma 3's block without q_norm and k_norm, attention scores soft-capped
                      (attn_logit_softcapping 1.0, small enough to bend this tiny model's scores) before the mask,
                      logits soft-capped (final_logit_softcapping 3.0), query_pre_attn_scalar 12, layers sliding
                      (window 5) and full alternating [sliding, full, sliding], one rope (theta 1e4) for all, tied
                      embeddings, pad_token_id 0

each with config.json, model.safetensors, batch.json, expected.safetensors, train.json and final.safetensors as
make_golden.py writes them (same batch construction, same 10-step AdamW settings and schedule; see README.md).
llama3-rope/inv_freq.json holds transformers' own inverse frequencies (its ROPE_INIT_FUNCTIONS, float32) for
several rope configs, dynamic at several sequence lengths among them.

Every number comes from a float64 computation on the CPU starting from the saved float32 weights. With
transformers present, the model is transformers' own, with its float32 spots made float64 (RMSNorm, RoPE cos/sin,
eager softmax; BLOOM: the softmax, which it computes with dtype=float32), and an independent plain-torch float64
implementation (this file) must reproduce it. Without transformers (--reference-only, for testing this script),
the independent implementation alone makes the fixtures and config.json is written by hand.

Run:  PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES= python tools/golden/make_golden_arch.py --out DIR
"""
import argparse
import datetime
import json
import math
import os
import statistics
import struct
import sys
import traceback
import types

import torch
import torch.nn.functional as F

V = 160          # vocab size
T = 16           # sequence length
IGNORE = -100

MODELS = {
    "bloom": dict(kind="bloom", seed=1004, data_seed=2004, C=48, L=2, NH=6, eps=1e-5, tied=True),
    "llama3-rope": dict(kind="llama", seed=1005, data_seed=2005, C=32, F=48, L=2, NH=4, KV=2, hd=8, eps=1e-5,
                        tied=False, max_pos=512,
                        rope=dict(rope_type="llama3", rope_theta=100.0, factor=8.0, low_freq_factor=1.0,
                                  high_freq_factor=4.0, original_max_position_embeddings=64)),
    "llama-linear-rope": dict(kind="llama", seed=1006, data_seed=2006, C=32, F=64, L=2, NH=4, KV=2, hd=8, eps=1e-6,
                              tied=True, max_pos=256, rope=dict(rope_type="linear", rope_theta=10000.0, factor=4.0)),
    "gemma3": dict(kind="llama", arch="gemma3", seed=1008, data_seed=2008, C=32, F=64, L=3, NH=4, KV=2, hd=16,
                   eps=1e-6, tied=True, max_pos=128, qpas=12, window=5, pad=0,
                   layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                   rope=dict(rope_type="linear", rope_theta=1000000.0, factor=4.0),
                   local_rope=dict(rope_type="default", rope_theta=10000.0)),
    "gemma2": dict(kind="llama", arch="gemma2", seed=1010, data_seed=2010, C=32, F=64, L=3, NH=4, KV=2, hd=16,
                   eps=1e-6, tied=True, max_pos=128, qpas=12, window=5, pad=0, attn_softcap=1.0, final_softcap=3.0,
                   layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                   rope=dict(rope_type="default", rope_theta=10000.0),
                   local_rope=dict(rope_type="default", rope_theta=10000.0)),
    "phi3": dict(kind="llama", arch="phi3", seed=1009, data_seed=2009, C=32, F=48, L=2, NH=4, KV=2, hd=8, eps=1e-5,
                 tied=False, max_pos=64, window=6,
                 rope=dict(rope_type="longrope", rope_theta=10000.0, short_factor=[1.0, 1.5, 2.0, 3.0],
                           long_factor=[1.2, 2.5, 4.0, 8.0], original_max_position_embeddings=8)),
    "qwen3": dict(kind="llama", arch="qwen3", seed=1007, data_seed=2007, C=32, F=64, L=2, NH=4, KV=2, hd=16, eps=1e-6,
                  tied=True, max_pos=128, rope=dict(rope_type="default", rope_theta=1000000.0)),
}

TRAIN = dict(steps=10, batch_per_step=12, seq_len=T, lr=1e-2, betas=[0.9, 0.95], eps=1e-8,
             weight_decay=0.1, warmup_steps=3, min_lr_ratio=0.1)

PROBLEMS = []
HF = None  # the transformers module, when present


def problem(msg):
    PROBLEMS.append(msg)
    print("!!! PROBLEM:", msg)


def maxrel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


# ---- data, loss and schedule: the same as make_golden.py (checked against it when transformers is present) ----

def causal_lm_loss(logits, labels):
    lg = logits[:, :-1, :].reshape(-1, logits.shape[-1])
    lb = labels[:, 1:].reshape(-1)
    return F.cross_entropy(lg, lb, ignore_index=IGNORE, reduction="mean")


def per_seq_loss(logits, labels):
    B = logits.shape[0]
    lg = logits[:, :-1, :].reshape(-1, logits.shape[-1])
    lb = labels[:, 1:].reshape(-1)
    ce = F.cross_entropy(lg, lb, ignore_index=IGNORE, reduction="none").view(B, -1)
    mask = (labels[:, 1:] != IGNORE).to(logits.dtype)
    cnt = mask.sum(1)
    return (ce * mask).sum(1) / cnt, cnt


def make_seqs(gen, n, force_special=False):
    ids = torch.randint(0, V, (n, T), generator=gen)
    if force_special:
        ids[0, 10] = 0
        ids[n - 1, 12] = V - 1
    labels = ids.clone()
    for i in range(n):
        p = int(torch.randint(0, 9, (1,), generator=gen))
        labels[i, :p] = IGNORE
        if i % 4 == 2:
            labels[i, -3:] = IGNORE
    return ids, labels


def lr_at(s, lr, W, steps, min_ratio):
    if s <= W:
        return lr * s / W
    p = (s - W) / max(1, steps - W)
    f = min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * p))
    return lr * f


def round2(x):
    return float(f"{x:.2g}")


def check_against_make_golden():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_golden as mg
    same = True
    for s in range(1, 11):
        same &= lr_at(s, 0.01, 3, 10, 0.1) == mg.lr_at(s, 0.01, 3, 10, 0.1)
    a = make_seqs(torch.Generator().manual_seed(7), 12, True)
    b = mg.make_seqs(torch.Generator().manual_seed(7), 12, True)
    same &= torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    same &= TRAIN == mg.TRAIN and V == mg.V and T == mg.T
    print(f"helpers identical to make_golden.py's: {same}")
    if not same:
        problem("data/schedule helpers differ from make_golden.py")
    return mg


# ---- parameters -------------------------------------------------------------------------------------------

def param_specs(spec):
    """(name, shape) in transformers' named_parameters() order."""
    out = []
    if spec["kind"] == "bloom":
        C = spec["C"]
        out += [("transformer.word_embeddings.weight", (V, C)),
                ("transformer.word_embeddings_layernorm.weight", (C,)),
                ("transformer.word_embeddings_layernorm.bias", (C,))]
        for i in range(spec["L"]):
            p = f"transformer.h.{i}."
            out += [(p + "input_layernorm.weight", (C,)), (p + "input_layernorm.bias", (C,)),
                    (p + "self_attention.query_key_value.weight", (3 * C, C)),
                    (p + "self_attention.query_key_value.bias", (3 * C,)),
                    (p + "self_attention.dense.weight", (C, C)), (p + "self_attention.dense.bias", (C,)),
                    (p + "post_attention_layernorm.weight", (C,)), (p + "post_attention_layernorm.bias", (C,)),
                    (p + "mlp.dense_h_to_4h.weight", (4 * C, C)), (p + "mlp.dense_h_to_4h.bias", (4 * C,)),
                    (p + "mlp.dense_4h_to_h.weight", (C, 4 * C)), (p + "mlp.dense_4h_to_h.bias", (C,))]
        out += [("transformer.ln_f.weight", (C,)), ("transformer.ln_f.bias", (C,))]
        if not spec["tied"]:
            out.append(("lm_head.weight", (V, C)))
    else:
        C, Fw, H, KV, hd = spec["C"], spec["F"], spec["NH"], spec["KV"], spec["hd"]
        out.append(("model.embed_tokens.weight", (V, C)))
        for i in range(spec["L"]):
            p = f"model.layers.{i}."
            if spec.get("arch") == "phi3":
                out += [(p + "self_attn.o_proj.weight", (C, H * hd)), (p + "self_attn.qkv_proj.weight", ((H + 2 * KV) * hd, C)),
                        (p + "mlp.gate_up_proj.weight", (2 * Fw, C)), (p + "mlp.down_proj.weight", (C, Fw)),
                        (p + "input_layernorm.weight", (C,)), (p + "post_attention_layernorm.weight", (C,))]
                continue
            out += [(p + "self_attn.q_proj.weight", (H * hd, C)), (p + "self_attn.k_proj.weight", (KV * hd, C)),
                    (p + "self_attn.v_proj.weight", (KV * hd, C)), (p + "self_attn.o_proj.weight", (C, H * hd))]
            if spec.get("arch") in ("qwen3", "gemma3"):
                out += [(p + "self_attn.q_norm.weight", (hd,)), (p + "self_attn.k_norm.weight", (hd,))]
            out += [(p + "mlp.gate_proj.weight", (Fw, C)), (p + "mlp.up_proj.weight", (Fw, C)),
                    (p + "mlp.down_proj.weight", (C, Fw)),
                    (p + "input_layernorm.weight", (C,)), (p + "post_attention_layernorm.weight", (C,))]
            if spec.get("arch") in ("gemma2", "gemma3"):
                out += [(p + "pre_feedforward_layernorm.weight", (C,)), (p + "post_feedforward_layernorm.weight", (C,))]
        out.append(("model.norm.weight", (C,)))
        if not spec["tied"]:
            out.append(("lm_head.weight", (V, C)))
    return out


def draw_params(spec):
    """float32 values, drawn in named_parameters() order from the spec's seed, as make_golden.py's rules."""
    torch.manual_seed(spec["seed"])
    P = {}
    for name, shape in param_specs(spec):
        t = torch.empty(shape, dtype=torch.float32)
        if name.endswith("embed_tokens.weight") or name.endswith("word_embeddings.weight"):
            t.normal_(0.0, 0.5); kind = "embedding N(0,0.5)"
        elif name == "lm_head.weight":
            t.normal_(0.0, 0.15); kind = "lm_head N(0,0.15)"
        elif name.endswith(".bias"):
            t.normal_(0.0, 0.1); kind = "bias N(0,0.1)"
        elif len(shape) == 1 and spec.get("arch") in ("gemma2", "gemma3"):  # Gemma scales by (1 + w)
            t.uniform_(-0.5, 0.5); kind = "norm U(-0.5,0.5)"
        elif len(shape) == 1:
            t.uniform_(0.5, 1.5); kind = "norm U(0.5,1.5)"
        else:
            t.normal_(0.0, 0.15); kind = "linear N(0,0.15)"
        P[name] = t
        print(f"    {name:52s} {str(tuple(shape)):12s} {kind}")
    return P


# ---- rope -------------------------------------------------------------------------------------------------

def inv_freq64(rope, hd, max_pos, seq_len=None):
    """transformers' inverse frequencies for a rope config, in float64 (modeling_rope_utils' formulas)."""
    base, t = rope["rope_theta"], rope.get("rope_type", "default")
    if t == "dynamic":
        s = max(seq_len or max_pos, max_pos)
        base = base * ((rope["factor"] * s / max_pos) - (rope["factor"] - 1)) ** (hd / (hd - 2))
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    if t == "linear":
        inv = inv / rope["factor"]
    elif t == "llama3":
        factor, lo, hi, old = (rope[k] for k in ("factor", "low_freq_factor", "high_freq_factor",
                                                 "original_max_position_embeddings"))
        lo_wl, hi_wl = old / lo, old / hi
        wl = 2 * math.pi / inv
        scaled = torch.where(wl > lo_wl, inv / factor, inv)
        smooth = (old / wl - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wl < hi_wl) * ~(wl > lo_wl)
        inv = torch.where(medium, smoothed, scaled)
        print(f"  llama3 rope: {len(wl)} frequencies, {int((wl < hi_wl).sum())} kept (wavelength < {hi_wl}), "
              f"{int((wl > lo_wl).sum())} divided (> {lo_wl}), {int(medium.sum())} interpolated")
    elif t == "longrope":  # transformers picks the long factors for sequences past the original length
        ext = rope["long_factor"] if (seq_len or max_pos) > rope["original_max_position_embeddings"] else rope["short_factor"]
        inv = inv / torch.tensor(ext, dtype=torch.float64)
    elif t not in ("default", "dynamic"):
        raise ValueError(t)
    return inv


def attention_factor(rope, max_pos):
    """longrope's factor on cos and sin (transformers' default): sqrt(1 + ln(f) / ln(original)), f = max / original."""
    if rope.get("rope_type") != "longrope":
        return 1.0
    f = max_pos / rope["original_max_position_embeddings"]
    return 1.0 if f <= 1 else math.sqrt(1 + math.log(f) / math.log(rope["original_max_position_embeddings"]))


INV_FREQ_CASES = [
    dict(name="default", hd=8, max_pos=512, rope=dict(rope_type="default", rope_theta=10000.0), seq_len=None),
    dict(name="linear", hd=8, max_pos=256, rope=dict(rope_type="linear", rope_theta=10000.0, factor=4.0), seq_len=None),
    dict(name="llama3-tiny", hd=8, max_pos=512, rope=MODELS["llama3-rope"]["rope"], seq_len=None),
    dict(name="llama3.1-8b", hd=128, max_pos=131072,
         rope=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                   original_max_position_embeddings=8192), seq_len=None),
    dict(name="dynamic-within", hd=8, max_pos=64, rope=dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0),
         seq_len=16),
    dict(name="dynamic-at-max", hd=8, max_pos=64, rope=dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0),
         seq_len=64),
    dict(name="dynamic-beyond", hd=8, max_pos=64, rope=dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0),
         seq_len=200),
    dict(name="dynamic-beyond-hd64", hd=64, max_pos=2048,
         rope=dict(rope_type="dynamic", rope_theta=10000.0, factor=4.0), seq_len=5000),
]


def inv_freq_fixture():
    """transformers' inverse frequencies (ROPE_INIT_FUNCTIONS, float32) beside this file's float64 formulas."""
    cases = []
    for c in INV_FREQ_CASES:
        mine = inv_freq64(c["rope"], c["hd"], c["max_pos"], c["seq_len"])
        theirs, source = mine, "reference"
        if HF is not None:
            try:
                cfg = HF.LlamaConfig(vocab_size=V, hidden_size=c["hd"] * 2, intermediate_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, num_key_value_heads=2, head_dim=c["hd"],
                                     max_position_embeddings=c["max_pos"], rope_parameters=dict(c["rope"]))
                from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
                t = c["rope"]["rope_type"]
                if t == "default" and "default" not in ROPE_INIT_FUNCTIONS:
                    fn = HF.models.llama.modeling_llama.LlamaRotaryEmbedding.compute_default_rope_parameters
                    inv, att = fn(cfg, "cpu")
                else:
                    inv, att = ROPE_INIT_FUNCTIONS[t](cfg, "cpu", c["seq_len"])
                theirs, source = inv.double(), "transformers"
                err = maxrel(mine, theirs)
                print(f"  inv_freq {c['name']:22s} attention_factor {att}  float64 formula vs transformers: "
                      f"maxrel {err:.2e}")
                if err > 1e-6 or att != 1.0:
                    problem(f"inv_freq {c['name']}: formula differs from transformers ({err:.2e}, factor {att})")
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                problem(f"inv_freq {c['name']}: transformers' rope init failed: {e!r}")
        cases.append(dict(name=c["name"], head_dim=c["hd"], max_position_embeddings=c["max_pos"],
                          rope_parameters=c["rope"], seq_len=c["seq_len"], source=source,
                          inv_freq=[float(x) for x in theirs]))
    return cases


# ---- independent float64 references ----------------------------------------------------------------------

def ref_llama(P, spec, ids, inv, head_norms=True):
    """Llama, or with spec arch qwen3 (and head_norms) Qwen3: q and k heads RMS-normalised before the rotation."""
    H, KV, hd, eps = spec["NH"], spec["KV"], spec["hd"], spec["eps"]
    B, TT = ids.shape
    x = P["model.embed_tokens.weight"][ids]
    fr = torch.arange(TT, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([fr, fr], -1)
    af = attention_factor(spec["rope"], spec["max_pos"])
    cos, sin = emb.cos() * af, emb.sin() * af
    allowed = torch.arange(TT)[None, :] <= torch.arange(TT)[:, None]
    if spec.get("window"):
        allowed = allowed & (torch.arange(TT)[None, :] > torch.arange(TT)[:, None] - spec["window"])

    def rms(h, w):
        return w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps))

    def rot(u):
        return torch.cat([-u[..., hd // 2:], u[..., :hd // 2]], -1)

    for i in range(spec["L"]):
        pre = f"model.layers.{i}."
        h = rms(x, P[pre + "input_layernorm.weight"])
        if spec.get("arch") == "phi3":  # q|k|v rows of one fused matrix, gate|up likewise
            Wq, Wk, Wv = P[pre + "self_attn.qkv_proj.weight"].split([H * hd, KV * hd, KV * hd], 0)
            Wg, Wu = P[pre + "mlp.gate_up_proj.weight"].chunk(2, 0)
        else:
            Wq, Wk, Wv = (P[pre + f"self_attn.{n}_proj.weight"] for n in "qkv")
            Wg, Wu = P[pre + "mlp.gate_proj.weight"], P[pre + "mlp.up_proj.weight"]
        q = (h @ Wq.T).view(B, TT, H, hd).transpose(1, 2)
        k = (h @ Wk.T).view(B, TT, KV, hd).transpose(1, 2)
        v = (h @ Wv.T).view(B, TT, KV, hd).transpose(1, 2)
        if spec.get("arch") == "qwen3" and head_norms:
            q = rms(q, P[pre + "self_attn.q_norm.weight"])
            k = rms(k, P[pre + "self_attn.k_norm.weight"])
        q = q * cos + rot(q) * sin
        k = k * cos + rot(k) * sin
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        s = ((q @ k.transpose(-1, -2)) * hd ** -0.5).masked_fill(~allowed, float("-inf"))
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, TT, H * hd)
        x = x + o @ P[pre + "self_attn.o_proj.weight"].T
        h = rms(x, P[pre + "post_attention_layernorm.weight"])
        x = x + (F.silu(h @ Wg.T) * (h @ Wu.T)) @ P[pre + "mlp.down_proj.weight"].T
    x = rms(x, P["model.norm.weight"])
    W = P["lm_head.weight"] if "lm_head.weight" in P else P["model.embed_tokens.weight"]
    return x @ W.T


def ref_gemma(P, spec, ids, head_norms=True):
    """Gemma 3 (text) in float64: the independent reference of transformers' Gemma3ForCausalLM; with spec arch gemma2,
    of Gemma2ForCausalLM (no head norms; scores and logits soft-capped by the spec's caps, None or 0 for none)."""
    head_norms = head_norms and spec.get("arch") == "gemma3"
    attn_cap, final_cap = spec.get("attn_softcap"), spec.get("final_softcap")
    H, KV, hd, eps, C = spec["NH"], spec["KV"], spec["hd"], spec["eps"], spec["C"]
    B, TT = ids.shape
    scale = float(torch.tensor(C ** 0.5, dtype=torch.float32))  # transformers keeps sqrt(hidden) as a float32 buffer
    E = P["model.embed_tokens.weight"]
    # pad_token_id 0 is nn.Embedding's padding_idx: its row gets no gradient from the lookup (the tied head's only)
    x = torch.where((ids == spec["pad"])[..., None], E.detach()[ids], E[ids]) * scale
    tables = {}
    for t, rope in (("full_attention", spec["rope"]), ("sliding_attention", spec["local_rope"])):
        fr = torch.arange(TT, dtype=torch.float64)[:, None] * inv_freq64(rope, hd, spec["max_pos"])[None, :]
        emb = torch.cat([fr, fr], -1)
        tables[t] = (emb.cos(), emb.sin())
    q_idx, k_idx = torch.arange(TT)[:, None], torch.arange(TT)[None, :]
    masks = {"full_attention": k_idx <= q_idx, "sliding_attention": (k_idx <= q_idx) & (k_idx > q_idx - spec["window"])}

    def rms(h, w):
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)) * (1.0 + w)

    def rot(u):
        return torch.cat([-u[..., hd // 2:], u[..., :hd // 2]], -1)

    for i in range(spec["L"]):
        pre = f"model.layers.{i}."
        cos, sin = tables[spec["layer_types"][i]]
        h = rms(x, P[pre + "input_layernorm.weight"])
        q = (h @ P[pre + "self_attn.q_proj.weight"].T).view(B, TT, H, hd).transpose(1, 2)
        k = (h @ P[pre + "self_attn.k_proj.weight"].T).view(B, TT, KV, hd).transpose(1, 2)
        v = (h @ P[pre + "self_attn.v_proj.weight"].T).view(B, TT, KV, hd).transpose(1, 2)
        if head_norms:
            q = rms(q, P[pre + "self_attn.q_norm.weight"])
            k = rms(k, P[pre + "self_attn.k_norm.weight"])
        q = q * cos + rot(q) * sin
        k = k * cos + rot(k) * sin
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        s = (q @ k.transpose(-1, -2)) * spec["qpas"] ** -0.5
        if attn_cap:
            s = attn_cap * torch.tanh(s / attn_cap)
        s = s.masked_fill(~masks[spec["layer_types"][i]], float("-inf"))
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, TT, H * hd)
        x = x + rms(o @ P[pre + "self_attn.o_proj.weight"].T, P[pre + "post_attention_layernorm.weight"])
        h = rms(x, P[pre + "pre_feedforward_layernorm.weight"])
        m = (F.gelu(h @ P[pre + "mlp.gate_proj.weight"].T, approximate="tanh") * (h @ P[pre + "mlp.up_proj.weight"].T)) \
            @ P[pre + "mlp.down_proj.weight"].T
        x = x + rms(m, P[pre + "post_feedforward_layernorm.weight"])
    x = rms(x, P["model.norm.weight"])
    W = P["lm_head.weight"] if "lm_head.weight" in P else P["model.embed_tokens.weight"]
    z = x @ W.T
    return final_cap * torch.tanh(z / final_cap) if final_cap else z


def bloom_slopes(n):
    p = 2 ** math.floor(math.log2(n))
    s = [2.0 ** (-8.0 * (h + 1) / p) for h in range(p)]
    s += [2.0 ** (-8.0 * (2 * i + 1) / (2 * p)) for i in range(n - p)]
    return torch.tensor(s, dtype=torch.float64)


def bloom_gelu(x):
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def ref_bloom(P, spec, ids, qkv_layout="per_head"):
    C, H, eps = spec["C"], spec["NH"], spec["eps"]
    hd = C // H
    B, TT = ids.shape

    def ln(h, name):
        return F.layer_norm(h, (C,), P[name + ".weight"], P[name + ".bias"], eps)

    def lin(h, name):
        return h @ P[name + ".weight"].T + P[name + ".bias"]

    x = ln(P["transformer.word_embeddings.weight"][ids], "transformer.word_embeddings_layernorm")
    allowed = torch.arange(TT)[None, :] <= torch.arange(TT)[:, None]
    bias = bloom_slopes(H)[:, None, None] * torch.arange(TT, dtype=torch.float64)[None, None, :]  # slope * key
    for i in range(spec["L"]):
        pre = f"transformer.h.{i}."
        qkv = lin(ln(x, pre + "input_layernorm"), pre + "self_attention.query_key_value")
        if qkv_layout == "per_head":  # [NH, 3, HS] along the output dim, as BLOOM's checkpoints
            qkv = qkv.view(B, TT, H, 3, hd)
            q, k, v = (qkv[..., j, :].transpose(1, 2) for j in range(3))
        else:  # q | k | v blocks: only to show that the layout matters
            q, k, v = (t.reshape(B, TT, H, hd).transpose(1, 2) for t in qkv.split(C, -1))
        s = (q @ k.transpose(-1, -2)) * hd ** -0.5 + bias
        s = s.masked_fill(~allowed, float("-inf"))
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, TT, C)
        x = x + lin(o, pre + "self_attention.dense")
        h = ln(x, pre + "post_attention_layernorm")
        x = x + lin(bloom_gelu(lin(h, pre + "mlp.dense_h_to_4h")), pre + "mlp.dense_4h_to_h")
    x = ln(x, "transformer.ln_f")
    W = P["lm_head.weight"] if "lm_head.weight" in P else P["transformer.word_embeddings.weight"]
    return x @ W.T


def reference_forward(spec):
    if spec["kind"] == "bloom":
        return lambda P, ids: ref_bloom(P, spec, ids)
    if spec.get("arch") in ("gemma2", "gemma3"):
        return lambda P, ids: ref_gemma(P, spec, ids)
    inv = inv_freq64(spec["rope"], spec["hd"], spec["max_pos"])
    return lambda P, ids: ref_llama(P, spec, ids, inv)


# ---- transformers' model, float64-faithful ----------------------------------------------------------------

COUNT = {"rms": 0, "rope": 0, "attn": 0, "softmax": 0}
CURRENT = {}  # the spec being made
_softmax = F.softmax


def softmax64(input, dim=None, _stacklevel=3, dtype=None):
    """F.softmax, but a float64 input stays float64 (BLOOM asks for dtype=float32)."""
    if dtype is not None and input.dtype == torch.float64:
        COUNT["softmax"] += 1
        dtype = None
    return _softmax(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)


def hf_config(spec):
    if spec["kind"] == "bloom":
        return HF.BloomConfig(vocab_size=V, hidden_size=spec["C"], n_layer=spec["L"], n_head=spec["NH"],
                              layer_norm_epsilon=spec["eps"], apply_residual_connection_post_layernorm=False,
                              hidden_dropout=0.0, attention_dropout=0.0, tie_word_embeddings=spec["tied"],
                              pretraining_tp=1, slow_but_exact=False, attn_implementation="eager")
    kw = dict(vocab_size=V, hidden_size=spec["C"], intermediate_size=spec["F"], num_hidden_layers=spec["L"],
              num_attention_heads=spec["NH"], num_key_value_heads=spec["KV"], head_dim=spec["hd"],
              rms_norm_eps=spec["eps"], tie_word_embeddings=spec["tied"], attention_bias=False, mlp_bias=False,
              max_position_embeddings=spec["max_pos"], hidden_act="silu", attention_dropout=0.0)
    if spec.get("arch") == "gemma3":
        for k in ("mlp_bias", "hidden_act"):
            del kw[k]
        return HF.Gemma3TextConfig(rope_parameters={"full_attention": dict(spec["rope"]),
                                                    "sliding_attention": dict(spec["local_rope"])},
                                   attn_implementation="eager", hidden_activation="gelu_pytorch_tanh",
                                   query_pre_attn_scalar=spec["qpas"], sliding_window=spec["window"],
                                   layer_types=list(spec["layer_types"]), final_logit_softcapping=None,
                                   attn_logit_softcapping=None, pad_token_id=spec["pad"], **kw)
    if spec.get("arch") == "gemma2":
        for k in ("mlp_bias", "hidden_act"):
            del kw[k]
        return HF.Gemma2Config(rope_parameters=dict(spec["rope"]), attn_implementation="eager",
                               hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=spec["qpas"],
                               sliding_window=spec["window"], layer_types=list(spec["layer_types"]),
                               final_logit_softcapping=spec["final_softcap"],
                               attn_logit_softcapping=spec["attn_softcap"], pad_token_id=spec["pad"], **kw)
    if spec.get("arch") == "phi3":
        for k in ("mlp_bias", "attention_bias", "head_dim"):
            del kw[k]
        return HF.Phi3Config(rope_parameters=dict(spec["rope"]), attn_implementation="eager",
                             original_max_position_embeddings=spec["rope"]["original_max_position_embeddings"],
                             sliding_window=spec["window"], pad_token_id=None, **kw)
    if spec.get("arch") == "qwen3":
        del kw["mlp_bias"]
        cfg = HF.Qwen3Config(rope_parameters=dict(spec["rope"]), attn_implementation="eager", use_sliding_window=False,
                             **kw)
    else:
        cfg = HF.LlamaConfig(rope_parameters=dict(spec["rope"]), attn_implementation="eager", **kw)
    rp = getattr(cfg, "rope_parameters", None)
    print(f"  config rope_parameters: {rp}")
    if not isinstance(rp, dict) or rp.get("rope_type") != spec["rope"]["rope_type"]:
        problem(f"rope_parameters not taken as given: {rp}")
    return cfg


def hf_model(spec, P):
    cfg = hf_config(spec)
    model = getattr(HF, {"bloom": "BloomForCausalLM", "qwen3": "Qwen3ForCausalLM", "gemma3": "Gemma3ForCausalLM",
                         "gemma2": "Gemma2ForCausalLM", "phi3": "Phi3ForCausalLM"}.get(
        spec.get("arch", spec["kind"]), "LlamaForCausalLM"))(cfg)
    model.eval()
    print(f"  attn implementation: {getattr(model.config, '_attn_implementation', None)}")
    names = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    if names != [(n, tuple(s)) for n, s in param_specs(spec)]:
        problem(f"named_parameters differ from the expected names/shapes: {names}")
    missing, unexpected = model.load_state_dict(P, strict=False)
    print(f"  load_state_dict: missing {missing} unexpected {unexpected}")
    if unexpected or any(m != "lm_head.weight" for m in missing) or (missing and not spec["tied"]):
        problem(f"load_state_dict: missing {missing}, unexpected {unexpected}")
    tied = model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    print(f"  lm_head tied to the input embeddings: {tied}")
    if tied != spec["tied"]:
        problem(f"tied={tied}, expected {spec['tied']}")
    return model


def patch_llama(model, inv):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_golden as mg

    def rms(self, hidden_states):
        COUNT["rms"] += 1
        return mg.rms64_forward(self, hidden_states)

    def rope(self, x, position_ids, *args, **kwargs):
        COUNT["rope"] += 1
        freqs = position_ids.to(torch.float64)[..., None] * inv
        emb = torch.cat((freqs, freqs), dim=-1)
        sc = float(getattr(self, "attention_scaling", 1.0))
        return (emb.cos() * sc).to(x.dtype), (emb.sin() * sc).to(x.dtype)

    def eager(*args, **kwargs):
        COUNT["attn"] += 1
        return mg.eager64(*args, **kwargs)

    for m in model.modules():
        name = type(m).__name__
        if "RMSNorm" in name:
            m.forward = types.MethodType(rms, m)
        elif "RotaryEmbedding" in name:
            hf_inv = m.inv_freq.detach().double()  # longrope: the long factors', since the stock forward of 16 tokens
            inv_check = inv
            print(f"  {name}: attention_scaling {getattr(m, 'attention_scaling', None)}, rope_type "
                  f"{getattr(m, 'rope_type', None)}, inv_freq {[float(v) for v in hf_inv]}")
            err = maxrel(inv_check, hf_inv)
            print(f"  inv_freq: float64 formula vs transformers' buffer (float32): maxrel {err:.2e}")
            if err > 1e-6:
                problem(f"inv_freq differs from transformers' ({err:.2e})")
            m.forward = types.MethodType(rope, m)
    mod = sys.modules[type(model).__module__]
    if hasattr(mod, "eager_attention_forward"):
        mod.eager_attention_forward = eager
    else:
        problem(f"{mod.__name__} has no eager_attention_forward")


def eager_softcap64(module, query, key, value, attention_mask, dropout=0.0, scaling=None, softcap=None, **kwargs):
    """transformers' Gemma 2 eager attention (scores soft-capped before the mask), its softmax in float64."""
    COUNT["attn"] += 1
    n_rep = module.num_key_value_groups
    k = key.repeat_interleave(n_rep, dim=1)
    v = value.repeat_interleave(n_rep, dim=1)
    w = torch.matmul(query, k.transpose(2, 3)) * scaling
    if softcap is not None:
        w = torch.tanh(w / softcap) * softcap
    if attention_mask is not None:
        m = attention_mask[:, :, :, : k.shape[-2]]
        w = w.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else w + m
    w = torch.softmax(w, dim=-1)
    return torch.matmul(w, v).transpose(1, 2).contiguous(), w


def patch_gemma(model, spec):
    """transformers' Gemma 2 or 3 in float64: its RMSNorm ((1 + w), computed in float32), its rope (per layer type)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_golden as mg
    inv = {"full_attention": inv_freq64(spec["rope"], spec["hd"], spec["max_pos"]),
           "sliding_attention": inv_freq64(spec["local_rope"], spec["hd"], spec["max_pos"])}

    def rms(self, x):
        COUNT["rms"] += 1
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)

    def rope(self, x, position_ids, layer_type="full_attention"):  # Gemma 2: one rope, no layer_type
        COUNT["rope"] += 1
        freqs = position_ids.to(torch.float64)[..., None] * inv[layer_type]
        emb = torch.cat((freqs, freqs), dim=-1)
        sc = float(getattr(self, f"{layer_type}_attention_scaling", getattr(self, "attention_scaling", 1.0)))
        return (emb.cos() * sc).to(x.dtype), (emb.sin() * sc).to(x.dtype)

    def eager(*args, **kwargs):
        if spec["arch"] == "gemma2":
            if kwargs.get("softcap") != spec["attn_softcap"]:
                problem(f"gemma2: attention softcap {kwargs.get('softcap')}, expected {spec['attn_softcap']}")
            return eager_softcap64(*args, **kwargs)
        COUNT["attn"] += 1
        if kwargs.get("softcap") is not None:
            problem("gemma3: attention softcapping is on")
        return mg.eager64(*args, **kwargs)

    for m in model.modules():
        name = type(m).__name__
        if "RMSNorm" in name:
            m.forward = types.MethodType(rms, m)
        elif "RotaryEmbedding" in name:
            for t in inv:
                hf_inv = getattr(m, f"{t}_inv_freq", getattr(m, "inv_freq", None)).detach().double()
                err = maxrel(inv[t], hf_inv)
                print(f"  {t} inv_freq {[float(v) for v in hf_inv]}: float64 formula vs transformers' maxrel {err:.2e}")
                if err > 1e-6:
                    problem(f"{t} inv_freq differs from transformers' ({err:.2e})")
            m.forward = types.MethodType(rope, m)
    mod = sys.modules[type(model).__module__]
    mod.eager_attention_forward = eager


def hf_logits(model, ids):
    out = model(input_ids=ids, use_cache=False)
    if out.logits.dtype != torch.float64:
        problem(f"transformers returned {out.logits.dtype} logits")
    return out.logits


# ---- files --------------------------------------------------------------------------------------------------

def save_safetensors(tensors, path):
    """float32 tensors in the safetensors format (the same bytes safetensors.torch.save_file writes)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        b = tensors[name].detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def write_config_by_hand(spec, path):
    """config.json as transformers 5 writes it (used only without transformers)."""
    if spec["kind"] == "bloom":
        cj = dict(architectures=["BloomForCausalLM"], model_type="bloom", vocab_size=V, hidden_size=spec["C"],
                  n_layer=spec["L"], n_head=spec["NH"], layer_norm_epsilon=spec["eps"],
                  apply_residual_connection_post_layernorm=False, hidden_dropout=0.0, attention_dropout=0.0,
                  tie_word_embeddings=spec["tied"], pretraining_tp=1, slow_but_exact=False, dtype="float32")
    else:
        if spec.get("arch") in ("gemma2", "gemma3"):
            raise SystemExit(spec["arch"] + " needs transformers: its config.json is not written by hand")
        qwen3 = spec.get("arch") == "qwen3"
        cj = dict(architectures=["Qwen3ForCausalLM" if qwen3 else "LlamaForCausalLM"],
                  model_type="qwen3" if qwen3 else "llama", vocab_size=V, hidden_size=spec["C"],
                  intermediate_size=spec["F"], num_hidden_layers=spec["L"], num_attention_heads=spec["NH"],
                  num_key_value_heads=spec["KV"], head_dim=spec["hd"], rms_norm_eps=spec["eps"],
                  tie_word_embeddings=spec["tied"], attention_bias=False, mlp_bias=False,
                  max_position_embeddings=spec["max_pos"], hidden_act="silu", rope_parameters=spec["rope"],
                  dtype="float32")
    with open(path, "w") as f:
        json.dump(cj, f, indent=2)


# ---- training -----------------------------------------------------------------------------------------------

def train(named, forward, reset, ids, labels, max_norm):
    reset()
    params = [p for _, p in named]
    decay = [p for _, p in named if p.dim() >= 2]
    no_decay = [p for _, p in named if p.dim() < 2]
    c = TRAIN
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": c["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=c["lr"], betas=tuple(c["betas"]), eps=c["eps"], foreach=False)
    losses, norms, lrs = [], [], []
    bs = c["batch_per_step"]
    for k in range(c["steps"]):
        for p in params:
            p.grad = None
        loss = causal_lm_loss(forward(ids[k * bs:(k + 1) * bs]), labels[k * bs:(k + 1) * bs])
        loss.backward()
        n = torch.nn.utils.clip_grad_norm_(params, max_norm)
        lr = lr_at(k + 1, c["lr"], c["warmup_steps"], c["steps"], c["min_lr_ratio"])
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        losses.append(float(loss)); norms.append(float(n)); lrs.append(lr)
    return losses, norms, lrs


# ---- per model ----------------------------------------------------------------------------------------------

def do_model(name, spec, out_root):
    CURRENT.clear()
    CURRENT.update(spec)
    print(f"\n================ {name} ({spec['kind']}) ================")
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    P32 = draw_params(spec)
    ref = reference_forward(spec)
    gen = torch.Generator().manual_seed(spec["data_seed"])
    ids, labels = make_seqs(gen, 4, force_special=True)

    # independent reference, float64 from the float32 values
    P = {n: p.double().requires_grad_(True) for n, p in P32.items()}
    logits = ref(P, ids)
    loss = causal_lm_loss(logits, labels)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in P.items()}
    logits = logits.detach()
    print(f"  reference loss {float(loss):.12f}")

    if spec["kind"] == "bloom":
        with torch.no_grad():
            other = ref_bloom(P, spec, ids, qkv_layout="blocks")
        print(f"  q|k|v blocks instead of BLOOM's per-head layout: max |dlogits| {float((other - logits).abs().max()):.3e}")
        print(f"  ALiBi slopes for {spec['NH']} heads: {[float(s) for s in bloom_slopes(spec['NH'])]}")
    elif spec.get("arch") == "gemma2":
        with torch.no_grad():
            variants = (("without the attention soft cap", ref_gemma(P, dict(spec, attn_softcap=None), ids)),
                        ("without the final soft cap", ref_gemma(P, dict(spec, final_softcap=None), ids)),
                        ("without the sliding window", ref_gemma(P, dict(spec, window=1000), ids)))
        for what, alt in variants:
            dmax = float((alt - logits).abs().max())
            print(f"  {what}: max |dlogits| {dmax:.3e}")
            if dmax < 1e-3:
                problem(f"{name}: {what}, the logits barely change ({dmax:.2e})")
    elif spec.get("arch") == "gemma3":
        with torch.no_grad():
            bare = ref_gemma(P, spec, ids, head_norms=False)
            other = ref_gemma(P, dict(spec, window=1000), ids)
            unscaled = ref_gemma(P, dict(spec, rope=dict(rope_type="default", rope_theta=spec["rope"]["rope_theta"])), ids)
        for what, alt in (("without q_norm and k_norm", bare), ("without the sliding window", other),
                          ("without the global layers' rope scaling", unscaled)):
            dmax = float((alt - logits).abs().max())
            print(f"  {what}: max |dlogits| {dmax:.3e}")
            if dmax < 1e-3:
                problem(f"{name}: {what}, the logits barely change ({dmax:.2e})")
    else:
        with torch.no_grad():
            plain = ref_llama(P, spec, ids, inv_freq64(dict(rope_type="default", rope_theta=spec["rope"]["rope_theta"]),
                                                       spec["hd"], spec["max_pos"]))
        dmax = float((plain - logits).abs().max())
        print(f"  unscaled rope instead: max |dlogits| {dmax:.3e}")
        if dmax < 1e-3 and spec["rope"]["rope_type"] != "default":
            problem(f"{name}: the rope scaling barely changes the logits ({dmax:.2e})")
        if spec.get("arch") == "qwen3":
            with torch.no_grad():
                bare = ref_llama(P, spec, ids, inv_freq64(spec["rope"], spec["hd"], spec["max_pos"]), head_norms=False)
            dmax = float((bare - logits).abs().max())
            print(f"  without q_norm and k_norm: max |dlogits| {dmax:.3e}")
            if dmax < 1e-3:
                problem(f"{name}: the head norms barely change the logits ({dmax:.2e})")

    model = None
    if HF is not None:
        model = hf_model(spec, P32)
        model.save_pretrained(d)
        gen_cfg = os.path.join(d, "generation_config.json")
        if os.path.exists(gen_cfg):
            os.remove(gen_cfg)
        from safetensors.torch import load_file
        saved = load_file(os.path.join(d, "model.safetensors"))
        ok = all(torch.equal(saved[n], P32[n]) for n in saved) and set(saved) == set(P32)
        print(f"  saved {sorted(os.listdir(d))}; model.safetensors holds exactly the drawn float32 values: {ok}")
        if not ok:
            problem(f"{name}: saved tensors {sorted(saved)} differ from the drawn ones")
        with open(os.path.join(d, "config.json")) as f:
            print(f"  config.json: {f.read()}")
        model.to(torch.float64)
        with torch.no_grad():
            stock = hf_logits(model, ids)
        if spec["kind"] == "bloom":
            F.softmax = softmax64
            torch.nn.functional.softmax = softmax64
            if spec["NH"] and hasattr(sys.modules[type(model).__module__], "build_alibi_tensor"):
                mask = torch.ones(1, T, dtype=torch.long)
                alibi = sys.modules[type(model).__module__].build_alibi_tensor(mask, spec["NH"], torch.float64)
                hf_slopes = alibi.view(spec["NH"], T)[:, 1]
                print(f"  transformers' ALiBi slopes: {[float(s) for s in hf_slopes]}")
                if maxrel(hf_slopes, bloom_slopes(spec["NH"])) > 1e-7:
                    problem(f"{name}: ALiBi slopes differ from transformers'")
        elif spec.get("arch") in ("gemma2", "gemma3"):
            patch_gemma(model, spec)
        else:
            patch_llama(model, inv_freq64(spec["rope"], spec["hd"], spec["max_pos"]))
        for k in COUNT:
            COUNT[k] = 0
        model.zero_grad(set_to_none=True)
        hl = hf_logits(model, ids)
        hloss = causal_lm_loss(hl, labels)
        hloss.backward()
        print(f"  patched call counts: {COUNT}")
        needed = ["softmax"] if spec["kind"] == "bloom" else ["rms", "rope", "attn"]
        for k in needed:
            if COUNT[k] == 0:
                problem(f"{name}: float64 patch for {k} not used")
        hgrads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        hl = hl.detach()
        print(f"  float64 transformers vs stock: logits maxrel {maxrel(hl, stock):.3e}")
        le = maxrel(logits, hl)
        ge = max(maxrel(grads[n], hgrads[n]) for n in hgrads)
        for n in hgrads:
            if maxrel(grads[n], hgrads[n]) > 1e-8:
                print(f"  gradient of {n} differs: maxrel {maxrel(grads[n], hgrads[n]):.3e}")
        print(f"  independent reference vs transformers (float64): logits maxrel {le:.3e}, grads maxrel {ge:.3e}, "
              f"loss diff {abs(float(loss) - float(hloss)):.3e}")
        if le > 1e-9 or ge > 1e-8 or set(hgrads) != set(grads):
            problem(f"{name}: independent reference disagrees with transformers")
        logits, loss, grads = hl, hloss.detach(), hgrads
    else:
        write_config_by_hand(spec, os.path.join(d, "config.json"))
        save_safetensors(P32, os.path.join(d, "model.safetensors"))

    sl, sc = per_seq_loss(logits, labels)
    print(f"  seq_loss {[round(float(x), 6) for x in sl]} seq_tokens {[int(x) for x in sc]}")
    with open(os.path.join(d, "batch.json"), "w") as f:
        json.dump({"input_ids": ids.tolist(), "labels": labels.tolist()}, f)
    exp = {"logits": logits.float(), "loss": loss.detach().reshape(1).float(), "seq_loss": sl.float(),
           "seq_tokens": sc.float()}
    for n, g in grads.items():
        exp["grad." + n] = g.float()
    save_safetensors(exp, os.path.join(d, "expected.safetensors"))
    print(f"  expected.safetensors: {len(exp)} tensors; loss {float(loss):.10f}")

    # ---- training trajectory
    c = TRAIN
    tids, tlabels = make_seqs(gen, c["steps"] * c["batch_per_step"])
    if model is not None:
        named = list(model.named_parameters())
        init_sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
        forward = lambda x: hf_logits(model, x)  # noqa: E731
        reset = lambda: model.load_state_dict(init_sd)  # noqa: E731
    else:
        named = list(P.items())
        init = {n: p.detach().clone() for n, p in P.items()}
        forward = lambda x: ref(P, x)  # noqa: E731

        def reset():
            with torch.no_grad():
                for n, p in P.items():
                    p.copy_(init[n])
    _, norms0, _ = train(named, forward, reset, tids, tlabels, float("inf"))
    med = statistics.median(norms0)
    print(f"  unclipped norms: {[round(x, 5) for x in norms0]}  median {med:.5f}")
    chosen = None
    for cand in (round2(med), round2(med * 0.9), round2(med * 1.1), round2(med * 0.8), round2(med * 1.2),
                 round2(med * 0.7), round2(med * 1.3)):
        losses, norms, lrs = train(named, forward, reset, tids, tlabels, cand)
        clipped = [nn > cand for nn in norms]
        gap = min(abs(nn - cand) / cand for nn in norms)
        print(f"  max_norm {cand}: clipped {sum(clipped)}/{len(norms)}, min rel gap {gap:.2e}")
        if 0 < sum(clipped) < len(norms) and gap > 1e-3:
            chosen = cand
            break
    if chosen is None:
        problem(f"{name}: no max_norm gave a mix of clipped and unclipped steps; keeping {cand}")
        chosen = cand
    print(f"  max_grad_norm {chosen}\n  loss      {losses}\n  grad_norm {norms}\n  lr        {lrs}")
    tj = {"steps": c["steps"], "batch_per_step": c["batch_per_step"], "seq_len": c["seq_len"], "lr": c["lr"],
          "betas": c["betas"], "eps": c["eps"], "weight_decay": c["weight_decay"], "decay": "matrices",
          "max_grad_norm": chosen,
          "schedule": {"kind": "cosine", "warmup_steps": c["warmup_steps"], "min_lr_ratio": c["min_lr_ratio"]},
          "input_ids": tids.tolist(), "labels": tlabels.tolist(),
          "loss": losses, "grad_norm": norms, "lr_per_step": lrs}
    with open(os.path.join(d, "train.json"), "w") as f:
        json.dump(tj, f)
    final = {n: p.detach().float().clone() for n, p in named}
    save_safetensors(final, os.path.join(d, "final.safetensors"))
    print(f"  final.safetensors: {len(final)} tensors")
    if spec["kind"] == "bloom" and HF is not None:
        F.softmax = _softmax
        torch.nn.functional.softmax = _softmax


def main():
    global HF
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                  "src", "test", "resources", "golden"))
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--reference-only", action="store_true", help="without transformers (to test this script)")
    args = ap.parse_args()
    torch.set_default_dtype(torch.float32)
    if not args.reference_only:
        import transformers
        HF = transformers
    print(f"date {datetime.date.today()}  python {sys.version.split()[0]}  torch {torch.__version__}  "
          f"transformers {HF.__version__ if HF else 'absent (reference only)'}")
    if HF is not None:
        check_against_make_golden()
    os.makedirs(args.out, exist_ok=True)
    for name, spec in MODELS.items():
        if args.only and name not in args.only:
            continue
        try:
            do_model(name, spec, args.out)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            problem(f"{name}: failed with an exception")
            F.softmax = _softmax
            torch.nn.functional.softmax = _softmax
    print("\n================ rope inverse frequencies ================")
    try:
        cases = inv_freq_fixture()
        os.makedirs(os.path.join(args.out, "llama3-rope"), exist_ok=True)
        with open(os.path.join(args.out, "llama3-rope", "inv_freq.json"), "w") as f:
            json.dump({"cases": cases}, f, indent=1)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        problem("inv_freq fixture failed")
    print("\n================ summary ================")
    for root, _, fs in sorted(os.walk(args.out)):
        for f in sorted(fs):
            if any(root.endswith(m) for m in MODELS):
                print(f"  {os.path.relpath(os.path.join(root, f), args.out):45s} {os.path.getsize(os.path.join(root, f)):9d}")
    print(f"  problems: {PROBLEMS if PROBLEMS else 'none'}")
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main())
