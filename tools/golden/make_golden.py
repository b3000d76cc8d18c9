#!/usr/bin/env python3
"""Make tiny Hugging Face "golden" reference fixtures for fsdp4j.

Writes, under --out (default src/test/resources/golden):

  qwen2/ llama/ mistral/      config.json, model.safetensors (float32, as written by save_pretrained),
                              batch.json, expected.safetensors, train.json, final.safetensors
  llama-sharded/              the llama model again, saved in 2-3 safetensors shards + index json

All reference numbers are computed on the CPU in float64, starting from exactly the saved float32
weights. Stock transformers rounds some intermediates to float32 even in a float64 model (RMSNorm,
RoPE cos/sin, eager softmax, the loss); this script replaces those four spots with float64 versions of
the same formulas (the stock result is also computed and the difference printed), and cross-checks the
result against an independent plain-torch float64 implementation of the architecture.

Run (needs torch + transformers):  PYTHONUNBUFFERED=1 python tools/golden/make_golden.py --out DIR
"""
import argparse
import datetime
import json
import math
import os
import statistics
import sys
import traceback
import types

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file, save_file

V = 160          # vocab size
T = 16           # sequence length
IGNORE = -100

MODELS = {
    "qwen2": dict(
        cls="Qwen2ForCausalLM", cfg="Qwen2Config", seed=1001, data_seed=2001, theta=10000.0,
        kw=dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6,
                tie_word_embeddings=True, max_position_embeddings=64, use_sliding_window=False,
                sliding_window=None, hidden_act="silu", attention_dropout=0.0),
        tied=True, window=None),
    "llama": dict(
        cls="LlamaForCausalLM", cfg="LlamaConfig", seed=1002, data_seed=2002, theta=500000.0,
        kw=dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=1, rms_norm_eps=1e-5,
                tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                max_position_embeddings=64, hidden_act="silu", attention_dropout=0.0),
        tied=False, window=None),
    "mistral": dict(
        cls="MistralForCausalLM", cfg="MistralConfig", seed=1003, data_seed=2003, theta=1000000.0,
        kw=dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, sliding_window=5, rms_norm_eps=1e-6,
                tie_word_embeddings=False, max_position_embeddings=64, hidden_act="silu",
                attention_dropout=0.0, head_dim=8),
        tied=False, window=5),
}

TRAIN = dict(steps=10, batch_per_step=12, seq_len=T, lr=1e-2, betas=[0.9, 0.95], eps=1e-8,
             weight_decay=0.1, warmup_steps=3, min_lr_ratio=0.1)

PROBLEMS = []


def problem(msg):
    PROBLEMS.append(msg)
    print("!!! PROBLEM:", msg)


# ----------------------------------------------------------------------------------------------
# config / model construction
# ----------------------------------------------------------------------------------------------

def effective_theta(cfg):
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict):
        if "rope_theta" in rp:
            return float(rp["rope_theta"])
        for v in rp.values():  # nested per layer type
            if isinstance(v, dict) and "rope_theta" in v:
                return float(v["rope_theta"])
    t = getattr(cfg, "rope_theta", None)
    return None if t is None else float(t)


def make_config(spec, **override):
    cfg_cls = getattr(transformers, spec["cfg"])
    kw = dict(spec["kw"])
    kw.update(override)
    theta = spec["theta"]
    cfg = None
    try:
        cfg = cfg_cls(rope_parameters={"rope_type": "default", "rope_theta": theta},
                      attn_implementation="eager", **kw)
        if effective_theta(cfg) != theta:
            print(f"  rope_parameters= not honoured (theta={effective_theta(cfg)}), retry with rope_theta=")
            cfg = None
    except Exception as e:  # noqa: BLE001
        print(f"  config with rope_parameters failed: {e!r}; retry with rope_theta=")
        cfg = None
    if cfg is None:
        cfg = cfg_cls(rope_theta=theta, attn_implementation="eager", **kw)
    assert effective_theta(cfg) == theta, (effective_theta(cfg), theta)
    return cfg


def build_model(spec, cfg):
    cls = getattr(transformers, spec["cls"])
    model = cls(cfg)
    impl = getattr(model.config, "_attn_implementation", None)
    if impl != "eager":
        print(f"  attn implementation is {impl!r}, switching to eager")
        model.set_attn_implementation("eager")
        impl = getattr(model.config, "_attn_implementation", None)
    assert impl == "eager", impl
    model.eval()
    return model


def overwrite_params(model):
    """Re-draw every parameter (global torch RNG, seeded by the caller)."""
    rows = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("embed_tokens.weight"):
                p.normal_(0.0, 0.5); kind = "embedding N(0,0.5)"
            elif name == "lm_head.weight":
                p.normal_(0.0, 0.15); kind = "lm_head N(0,0.15)"
            elif name.endswith(".bias"):
                p.normal_(0.0, 0.1); kind = "bias N(0,0.1)"
            elif p.dim() == 1 and "norm" in name:
                p.uniform_(0.5, 1.5); kind = "norm U(0.5,1.5)"
            elif p.dim() == 2:
                p.normal_(0.0, 0.15); kind = "linear N(0,0.15)"
            else:
                raise RuntimeError(f"unclassified parameter {name} {tuple(p.shape)}")
            rows.append((name, tuple(p.shape), kind))
    for r in rows:
        print(f"    {r[0]:50s} {str(r[1]):12s} {r[2]}")


def is_tied(model):
    try:
        return model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    except AttributeError:
        return False


def save_hf(model, d, **kw):
    os.makedirs(d, exist_ok=True)
    try:
        model.save_pretrained(d, safe_serialization=True, **kw)
    except TypeError as e:
        print(f"  save_pretrained(safe_serialization=True) refused ({e}); transformers 5 always writes "
              f"safetensors, calling without it")
        model.save_pretrained(d, **kw)
    gen = os.path.join(d, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    return sorted(os.listdir(d))


def load_saved(d):
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            out.update(load_file(os.path.join(d, f)))
    return out


def check_saved_equal(model, d):
    saved = load_saved(d)
    sd = model.state_dict()
    for k, v in saved.items():
        assert k in sd, f"saved key {k} not in state_dict"
        assert v.dtype == torch.float32, (k, v.dtype)
        assert torch.equal(v, sd[k]), f"saved {k} differs"
    missing = [k for k in sd if k not in saved]
    print(f"  saved {len(saved)} tensors, all float32 and equal to the model; state_dict keys not in file: "
          f"{missing}")
    return saved


# ----------------------------------------------------------------------------------------------
# float64-faithful replacements for the spots where stock HF drops to float32
# ----------------------------------------------------------------------------------------------

COUNT = {"rms": 0, "rope": 0, "attn": 0}
CAPTURE = {"on": False, "attn": []}


def rms64_forward(self, hidden_states):
    COUNT["rms"] += 1
    eps = getattr(self, "variance_epsilon", getattr(self, "eps", None))
    var = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(var + eps))


def make_rope64_forward(theta, head_dim):
    def rope64_forward(self, x, position_ids, *args, **kwargs):
        COUNT["rope"] += 1
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        freqs = position_ids.to(torch.float64)[..., None] * inv  # [B, T, hd/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        sc = float(getattr(self, "attention_scaling", 1.0))
        return (emb.cos() * sc).to(x.dtype), (emb.sin() * sc).to(x.dtype)
    return rope64_forward


def repeat_kv(h, n_rep):
    b, kvh, s, d = h.shape
    if n_rep == 1:
        return h
    return h[:, :, None, :, :].expand(b, kvh, n_rep, s, d).reshape(b, kvh * n_rep, s, d)


def eager64(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    COUNT["attn"] += 1
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    n_rep = module.num_key_value_groups
    k = repeat_kv(key, n_rep)
    v = repeat_kv(value, n_rep)
    w = torch.matmul(query, k.transpose(2, 3)) * scaling
    if attention_mask is not None:
        m = attention_mask[:, :, :, : k.shape[-2]]
        if m.dtype == torch.bool:
            w = w.masked_fill(~m, float("-inf"))
        else:
            w = w + m
    w = torch.softmax(w, dim=-1)  # in the input dtype (float64), unlike stock HF (float32)
    if CAPTURE["on"]:
        CAPTURE["attn"].append(w.detach().clone())
    out = torch.matmul(w, v).transpose(1, 2).contiguous()
    return out, w


PATCHED_MODULES = set()


def patch_model(model, theta, head_dim):
    n_rms = n_rope = 0
    for m in model.modules():
        name = type(m).__name__
        if "RMSNorm" in name:
            m.forward = types.MethodType(rms64_forward, m); n_rms += 1
        elif "RotaryEmbedding" in name:
            m.forward = types.MethodType(make_rope64_forward(theta, head_dim), m); n_rope += 1
    modname = type(model).__module__
    mod = sys.modules[modname]
    if hasattr(mod, "eager_attention_forward"):
        mod.eager_attention_forward = eager64
        PATCHED_MODULES.add(modname)
    else:
        problem(f"{modname} has no eager_attention_forward to patch")
    print(f"  patched {n_rms} RMSNorm, {n_rope} rotary modules, eager attention in {modname}")


def try_global_eager_patch():
    try:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        for key in ("eager",):
            try:
                ALL_ATTENTION_FUNCTIONS[key] = eager64
                print("  also registered eager64 as ALL_ATTENTION_FUNCTIONS['eager']")
            except Exception as e:  # noqa: BLE001
                print(f"  could not register eager64 globally: {e!r}")
    except Exception as e:  # noqa: BLE001
        print(f"  no ALL_ATTENTION_FUNCTIONS: {e!r}")


# ----------------------------------------------------------------------------------------------
# losses, data
# ----------------------------------------------------------------------------------------------

def causal_lm_loss(logits, labels):
    """HF ForCausalLMLoss semantics (position t predicts label t+1, mean over unmasked), in float64."""
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
        ids[0, 10] = 0          # id 0 as input and as (unmasked) label
        ids[n - 1, 12] = V - 1  # id 159 likewise
    labels = ids.clone()
    for i in range(n):
        p = int(torch.randint(0, 9, (1,), generator=gen))  # prefix 0..8
        labels[i, :p] = IGNORE
        if i % 4 == 2:
            labels[i, -3:] = IGNORE
    return ids, labels


# ----------------------------------------------------------------------------------------------
# independent plain-torch float64 reference of the architecture
# ----------------------------------------------------------------------------------------------

def ref_forward(P, cfg_vals, ids, window):
    H, KV, hd, eps, theta, L = (cfg_vals[k] for k in ("H", "KV", "hd", "eps", "theta", "L"))
    B, TT = ids.shape
    x = P["model.embed_tokens.weight"][ids]
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    fr = torch.arange(TT, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([fr, fr], -1)
    cos, sin = emb.cos(), emb.sin()
    qi = torch.arange(TT)[:, None]
    ki = torch.arange(TT)[None, :]
    allowed = ki <= qi
    if window is not None:
        allowed = allowed & (ki > qi - window)

    def lin(h, name):
        y = h @ P[name + ".weight"].T
        if name + ".bias" in P:
            y = y + P[name + ".bias"]
        return y

    def rms(h, w):
        return w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps))

    def rot(t):
        return torch.cat([-t[..., hd // 2:], t[..., : hd // 2]], -1)

    for l in range(L):
        pre = f"model.layers.{l}."
        h = rms(x, P[pre + "input_layernorm.weight"])
        q = lin(h, pre + "self_attn.q_proj").view(B, TT, H, hd).transpose(1, 2)
        k = lin(h, pre + "self_attn.k_proj").view(B, TT, KV, hd).transpose(1, 2)
        v = lin(h, pre + "self_attn.v_proj").view(B, TT, KV, hd).transpose(1, 2)
        q = q * cos + rot(q) * sin
        k = k * cos + rot(k) * sin
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        s = (q @ k.transpose(-1, -2)) * hd ** -0.5
        s = s.masked_fill(~allowed, float("-inf"))
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, TT, H * hd)
        x = x + lin(o, pre + "self_attn.o_proj")
        h = rms(x, P[pre + "post_attention_layernorm.weight"])
        x = x + lin(F.silu(lin(h, pre + "mlp.gate_proj")) * lin(h, pre + "mlp.up_proj"), pre + "mlp.down_proj")
    x = rms(x, P["model.norm.weight"])
    W = P["lm_head.weight"] if "lm_head.weight" in P else P["model.embed_tokens.weight"]
    return x @ W.T


def maxrel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


# ----------------------------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------------------------

def lr_at(s, lr, W, steps, min_ratio):
    if s <= W:
        return lr * s / W
    p = (s - W) / max(1, steps - W)
    f = min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * p))
    return lr * f


def train(model, init_sd, ids, labels, max_norm):
    model.load_state_dict(init_sd)
    named = list(model.named_parameters())
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
        model.zero_grad(set_to_none=True)
        bi, bl = ids[k * bs:(k + 1) * bs], labels[k * bs:(k + 1) * bs]
        loss = causal_lm_loss(forward_logits(model, bi), bl)
        loss.backward()
        n = torch.nn.utils.clip_grad_norm_(params, max_norm)
        lr = lr_at(k + 1, c["lr"], c["warmup_steps"], c["steps"], c["min_lr_ratio"])
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        losses.append(float(loss)); norms.append(float(n)); lrs.append(lr)
    return losses, norms, lrs


def forward_logits(model, ids):
    out = model(input_ids=ids, use_cache=False)
    if out.logits.dtype == torch.float64:
        return out.logits
    # some transformers versions upcast/downcast logits with .float(): take the head ourselves
    h = model.model(input_ids=ids, use_cache=False).last_hidden_state
    return model.lm_head(h)


def round2(x):
    return float(f"{x:.2g}")


# ----------------------------------------------------------------------------------------------
# per model
# ----------------------------------------------------------------------------------------------

def do_model(name, spec, out_root):
    print(f"\n================ {name} ({spec['cls']}) ================")
    d = os.path.join(out_root, name)
    cfg = make_config(spec)
    print(f"  config: theta={effective_theta(cfg)} layer_types={getattr(cfg, 'layer_types', None)} "
          f"sliding_window={getattr(cfg, 'sliding_window', None)} tie={cfg.tie_word_embeddings}")
    torch.manual_seed(spec["seed"])
    model = build_model(spec, cfg)
    overwrite_params(model)
    tied = is_tied(model)
    print(f"  lm_head tied to embed_tokens: {tied}")
    if tied != spec["tied"]:
        problem(f"{name}: tied={tied}, expected {spec['tied']}")

    files = save_hf(model, d)
    print(f"  saved files: {files}")
    check_saved_equal(model, d)
    with open(os.path.join(d, "config.json")) as f:
        cj = json.load(f)
    rope_form = {k: v for k, v in cj.items() if "rope" in k}
    print(f"  config.json rope form: {json.dumps(rope_form)}")
    print(f"  config.json keys: {sorted(cj.keys())}")

    if name == "llama":
        shard_dir = os.path.join(out_root, "llama-sharded")
        for size in (60000, 50000, 45000, 70000, 40000, 80000, 35000):
            if os.path.isdir(shard_dir):
                for f in os.listdir(shard_dir):
                    os.remove(os.path.join(shard_dir, f))
            sf = save_hf(model, shard_dir, max_shard_size=size)
            n_shards = len([f for f in sf if f.endswith(".safetensors")])
            print(f"  sharded with max_shard_size={size}: {sf}")
            if 2 <= n_shards <= 3 and "model.safetensors.index.json" in sf:
                break
        else:
            problem("could not make 2-3 shards")
        check_saved_equal(model, shard_dir)

    # ---- float64 from exactly the saved float32 values
    model.to(torch.float64)
    hd = cfg.hidden_size // cfg.num_attention_heads
    if getattr(cfg, "head_dim", None) not in (None, hd):
        problem(f"{name}: config.head_dim={cfg.head_dim} != {hd}")
    theta = spec["theta"]
    cv = dict(H=cfg.num_attention_heads, KV=cfg.num_key_value_heads, hd=hd, eps=cfg.rms_norm_eps,
              theta=theta, L=cfg.num_hidden_layers)

    gen = torch.Generator().manual_seed(spec["data_seed"])
    ids, labels = make_seqs(gen, 4, force_special=True)
    assert (ids == 0).any() and (ids == V - 1).any()

    # stock HF float64 (with its float32 internals), for comparison only
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=labels, use_cache=False)
    logits_stock = out.logits.detach().clone()
    loss_stock = out.loss.detach().clone()
    out.loss.backward()
    grads_stock = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    print(f"  stock HF: logits dtype {out.logits.dtype}, loss dtype {out.loss.dtype}, loss {float(out.loss.detach()):.10f}")

    # float64-faithful HF
    patch_model(model, theta, hd)
    for k in COUNT:
        COUNT[k] = 0
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=labels, use_cache=False)
    print(f"  patched call counts: {COUNT}")
    if COUNT["attn"] == 0:
        try_global_eager_patch()
        for k in COUNT:
            COUNT[k] = 0
        out = model(input_ids=ids, labels=labels, use_cache=False)
        print(f"  patched call counts (retry): {COUNT}")
    for k, v in COUNT.items():
        if v == 0:
            problem(f"{name}: float64 patch for {k} not used (that part stays float32-rounded)")
    logits = out.logits
    if logits.dtype != torch.float64:
        problem(f"{name}: HF returns {logits.dtype} logits from a float64 model; using model.model + lm_head")
        logits = forward_logits(model, ids)
    loss = causal_lm_loss(logits, labels)
    print(f"  HF loss (its own float32 loss code on float64 logits) {float(out.loss):.12f}  "
          f"float64 loss {float(loss):.12f}  diff {abs(float(out.loss) - float(loss)):.3e}")
    if abs(float(out.loss) - float(loss)) > 1e-5 * abs(float(loss)):
        problem(f"{name}: HF loss and float64 loss differ")
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    logits = logits.detach()
    print(f"  float64 vs stock HF: logits maxrel {maxrel(logits, logits_stock):.3e}, loss diff "
          f"{abs(float(loss) - float(loss_stock)):.3e}, grads maxrel "
          f"{max(maxrel(grads[n], grads_stock[n]) for n in grads):.3e}")
    if maxrel(logits, logits_stock) > 1e-4:
        problem(f"{name}: patched vs stock logits differ too much")

    # independent reference
    P = {n: p.detach().clone().requires_grad_(True) for n, p in model.named_parameters()}
    rl = ref_forward(P, cv, ids, spec["window"])
    causal_lm_loss(rl, labels).backward()
    g_err = max(maxrel(P[n].grad, grads[n]) for n in grads)
    print(f"  independent float64 reference vs HF float64: logits maxrel {maxrel(rl.detach(), logits):.3e}, "
          f"grads maxrel {g_err:.3e}")
    if maxrel(rl.detach(), logits) > 1e-9 or g_err > 1e-8:
        problem(f"{name}: independent reference disagrees with HF")

    if spec["window"] is not None:
        w = spec["window"]
        # (a) sliding window really changes logits
        cfg2 = make_config(spec, sliding_window=None)
        torch.manual_seed(0)
        m2 = build_model(spec, cfg2).to(torch.float64)
        m2.load_state_dict(model.state_dict())
        patch_model(m2, theta, hd)
        with torch.no_grad():
            l2 = forward_logits(m2, ids)
        dmax = float((l2 - logits).abs().max())
        print(f"  sliding_window=None vs {w}: max |dlogits| = {dmax:.4e}; positions < {w} equal: "
              f"{bool(torch.allclose(l2[:, :w], logits[:, :w], rtol=0, atol=1e-12))}")
        assert dmax > 1e-3, "sliding window does not change logits"
        # (b) attention pattern
        CAPTURE["on"] = True
        CAPTURE["attn"] = []
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)
        CAPTURE["on"] = False
        if CAPTURE["attn"]:
            a = CAPTURE["attn"][0][0, 0]  # layer 0, batch 0, head 0: [q, k]
            pattern_ok = True
            for q in range(T):
                ks = [int(k) for k in torch.nonzero(a[q] > 0).flatten()]
                exp = list(range(max(0, q - w + 1), q + 1))
                if q in (0, 4, 5, 6, 10, 15):
                    print(f"    query {q:2d} attends keys {ks}")
                pattern_ok &= ks == exp
            print(f"  HF sliding window convention: query q attends keys k with q-{w} < k <= q "
                  f"(window {w} keys incl. itself): {pattern_ok}")
            if not pattern_ok:
                problem(f"{name}: attention pattern is not q-{w} < k <= q")
        else:
            problem(f"{name}: no attention captured")
        # (c) reference with neighbouring windows
        with torch.no_grad():
            for ww in (w - 1, w, w + 1, None):
                print(f"    reference with window {ww}: logits maxrel vs HF {maxrel(ref_forward(P, cv, ids, ww), logits):.3e}")

    # ---- write forward/gradient fixture
    sl, sc = per_seq_loss(logits, labels)
    print(f"  seq_loss {[round(float(x), 6) for x in sl]} seq_tokens {[int(x) for x in sc]} "
          f"(token-weighted mean {float((sl * sc).sum() / sc.sum()):.12f})")
    with open(os.path.join(d, "batch.json"), "w") as f:
        json.dump({"input_ids": ids.tolist(), "labels": labels.tolist()}, f)
    exp = {"logits": logits.float().contiguous(),
           "loss": loss.detach().reshape(1).float(),
           "seq_loss": sl.float().contiguous(),
           "seq_tokens": sc.float().contiguous()}
    for n, g in grads.items():
        exp["grad." + n] = g.float().contiguous()
    save_file(exp, os.path.join(d, "expected.safetensors"))
    print(f"  expected.safetensors: {len(exp)} tensors; loss {float(loss):.10f}")

    # ---- training trajectory
    c = TRAIN
    n_seq = c["steps"] * c["batch_per_step"]
    tids, tlabels = make_seqs(gen, n_seq)
    init_sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    _, norms0, _ = train(model, init_sd, tids, tlabels, float("inf"))
    med = statistics.median(norms0)
    print(f"  unclipped norms: {[round(x, 5) for x in norms0]}  median {med:.5f}")
    chosen = None
    for cand in (round2(med), round2(med * 0.9), round2(med * 1.1), round2(med * 0.8), round2(med * 1.2),
                 round2(med * 0.7), round2(med * 1.3)):
        losses, norms, lrs = train(model, init_sd, tids, tlabels, cand)
        clipped = [nn > cand for nn in norms]
        gap = min(abs(nn - cand) / cand for nn in norms)
        print(f"  max_norm {cand}: clipped {sum(clipped)}/{len(norms)}, min rel gap {gap:.2e}")
        if 0 < sum(clipped) < len(norms) and gap > 1e-3:
            chosen = cand
            break
    if chosen is None:
        problem(f"{name}: no max_norm gave a mix of clipped and unclipped steps; keeping {cand}")
        chosen = cand
    print(f"  max_grad_norm {chosen}")
    print(f"  loss      {losses}")
    print(f"  grad_norm {norms}")
    print(f"  lr        {lrs}")
    tj = {"steps": c["steps"], "batch_per_step": c["batch_per_step"], "seq_len": c["seq_len"], "lr": c["lr"],
          "betas": c["betas"], "eps": c["eps"], "weight_decay": c["weight_decay"], "decay": "matrices",
          "max_grad_norm": chosen,
          "schedule": {"kind": "cosine", "warmup_steps": c["warmup_steps"], "min_lr_ratio": c["min_lr_ratio"]},
          "input_ids": tids.tolist(), "labels": tlabels.tolist(),
          "loss": losses, "grad_norm": norms, "lr_per_step": lrs}
    with open(os.path.join(d, "train.json"), "w") as f:
        json.dump(tj, f)
    final = {n: p.detach().float().contiguous().clone() for n, p in model.named_parameters()}
    save_file(final, os.path.join(d, "final.safetensors"))
    moved = max(float((p.detach() - init_sd[n]).abs().max()) for n, p in model.named_parameters())
    print(f"  final.safetensors: {len(final)} tensors; max |param change| {moved:.4f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                  "src", "test", "resources", "golden"))
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    torch.set_default_dtype(torch.float32)
    print(f"date {datetime.date.today()}  python {sys.version.split()[0]}  torch {torch.__version__}  "
          f"transformers {transformers.__version__}")
    os.makedirs(args.out, exist_ok=True)
    for name, spec in MODELS.items():
        if args.only and name not in args.only:
            continue
        try:
            do_model(name, spec, args.out)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            problem(f"{name}: failed with an exception")
    print("\n================ summary ================")
    total = 0
    for root, _, fs in sorted(os.walk(args.out)):
        for f in sorted(fs):
            s = os.path.getsize(os.path.join(root, f))
            total += s
            print(f"  {os.path.relpath(os.path.join(root, f), args.out):45s} {s:9d}")
    print(f"  total {total} bytes")
    print(f"  problems: {PROBLEMS if PROBLEMS else 'none'}")
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main())
