#!/usr/bin/env python3
"""Make the LoRA golden fixtures for fsdp4j: PEFT's LoRA on a tiny golden model (--model, default qwen2).

--model names a folder of src/test/resources/golden (qwen2, or one of make_golden_arch.py's: phi3, gemma2, gemma3,
qwen3, bloom). all-linear targets what PEFT's all-linear targets in that family: Phi-3's fused qkv_proj and
gate_up_proj, BLOOM's query_key_value, dense, dense_h_to_4h, dense_4h_to_h (their biases stay frozen, the adapters
have none). The models of make_golden_arch.py are run as that script runs them, with transformers' float32 spots made
float64 (its patch_llama, patch_gemma, and BLOOM's softmax); qwen2 stock, as the first fixture was made.

Writes, under --out (default src/test/resources/golden/<model>-lora):

  adapter_init/   a PEFT adapter directory (adapter_config.json, adapter_model.safetensors): the initial adapters,
                  A as PEFT initialises it and B random (so both train from the first step), rounded to float32;
                  fsdp4j starts from it with lora.init
  train.json      the data (48 sequences of 16 tokens, labels -100 on a prefix), the hyperparameters, and per step
                  the loss, the gradient norm before clipping and the learning rate of 12 AdamW steps
  final.safetensors   the adapters after the 12 steps, by PEFT's names
  logits.safetensors  `logits` (4, 16, 160): the final adapted model's logits on the first 4 sequences
  merged.safetensors  the base model with the final adapters merged (PEFT's merge_and_unload), by HF names
  adapter_final/  (all but qwen2) the final adapters as a PEFT adapter directory, float32, as PEFT writes it

Training runs in float64 on the CPU with torch.optim.AdamW (decoupled weight decay on every adapter: they are all
matrices), global-norm clipping, and fsdp4j's schedule (linear warmup, then cosine to min_lr_ratio * lr).

Run (needs torch, transformers, peft):  python tools/golden/make_golden_lora.py
"""
import argparse
import json
import math
import os
import sys

import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import save_file

STEPS, BATCH, T, V = 12, 4, 16, 160
HP = dict(lr=0.01, betas=[0.9, 0.95], eps=1e-8, weight_decay=0.1, decay="matrices", max_grad_norm=0.5,
          schedule=dict(kind="cosine", warmup_steps=3, min_lr_ratio=0.1))
LORA = dict(rank=4, alpha=8.0, target_modules="all-linear", rslora=False)


def lr_at(step):
    s = HP["schedule"]
    if step <= s["warmup_steps"]:
        return HP["lr"] * step / s["warmup_steps"]
    progress = (step - s["warmup_steps"]) / max(1, STEPS - s["warmup_steps"])
    r = s["min_lr_ratio"]
    return HP["lr"] * (r + (1 - r) * 0.5 * (1 + math.cos(math.pi * progress)))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    golden = os.path.join(here, "..", "..", "src", "test", "resources", "golden")
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2")
    ap.add_argument("--base", default=None, help="the base model's folder (default: golden/<model>)")
    ap.add_argument("--out", default=None, help="default: golden/<model>-lora")
    args = ap.parse_args()
    args.base = args.base or os.path.join(golden, args.model)
    args.out = args.out or os.path.join(golden, args.model + "-lora")
    os.makedirs(args.out, exist_ok=True)

    g = torch.Generator().manual_seed(3101)
    ids = torch.randint(0, V, (STEPS * BATCH, T), generator=g)
    labels = ids.clone()
    for i in range(ids.shape[0]):
        labels[i, : int(torch.randint(0, 6, (1,), generator=g))] = -100

    def load_base():
        model = transformers.AutoModelForCausalLM.from_pretrained(args.base, dtype=torch.float64,
                                                                  attn_implementation="eager")
        float64_faithful(model, args.model)
        return model

    base = load_base()
    config = LoraConfig(r=LORA["rank"], lora_alpha=LORA["alpha"], lora_dropout=0.0, target_modules="all-linear",
                        use_rslora=LORA["rslora"], bias="none", task_type="CAUSAL_LM")
    torch.manual_seed(3102)
    model = get_peft_model(base, config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.05)
            if p.requires_grad:
                p.copy_(p.float().double())  # both sides start from the same float32 values
    def save_adapter(name):
        """The model's adapters as PEFT saves them, under name/: float32, the base's path relative to the repository."""
        model.save_pretrained(os.path.join(args.out, name), safe_serialization=True)
        os.remove(os.path.join(args.out, name, "README.md"))
        cfg_path = os.path.join(args.out, name, "adapter_config.json")
        with open(cfg_path) as f:
            cfg = json.load(f)
        cfg["base_model_name_or_path"] = "src/test/resources/golden/" + args.model
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2)
        from safetensors.torch import load_file
        weights = os.path.join(args.out, name, "adapter_model.safetensors")
        save_file({k: v.float() for k, v in load_file(weights).items()}, weights, metadata={"format": "pt"})

    save_adapter("adapter_init")

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=HP["lr"], betas=tuple(HP["betas"]), eps=HP["eps"],
                            weight_decay=HP["weight_decay"])
    losses, norms, lrs = [], [], []
    model.train()
    for step in range(1, STEPS + 1):
        batch = slice((step - 1) * BATCH, step * BATCH)
        opt.zero_grad()
        loss = model(input_ids=ids[batch], labels=labels[batch]).loss
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, HP["max_grad_norm"])
        lr = lr_at(step)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        losses.append(loss.item())
        norms.append(norm.item())
        lrs.append(lr)
        print(f"step {step}: loss {loss.item():.6f} grad_norm {norm.item():.6f} lr {lr:.6f}")

    final = {"base_model.model." + k.replace(".default", "").removeprefix("base_model.model."): v.detach().float()
             for k, v in model.named_parameters() if v.requires_grad}
    save_file(final, os.path.join(args.out, "final.safetensors"), metadata={"format": "pt"})

    # the final adapters as PEFT loads them from a file, on the first sequences; and merged. qwen2-lora was made
    # before adapter_final/ was kept (the others have it: the final adapters as PEFT writes them, float32)
    final_dir = os.path.join(args.out, ".final_adapter")
    model.save_pretrained(final_dir, safe_serialization=True)
    if args.model != "qwen2":
        save_adapter("adapter_final")
    fresh = load_base()
    loaded = PeftModel.from_pretrained(fresh, final_dir)
    loaded.eval()
    with torch.no_grad():
        logits = loaded(input_ids=ids[:4]).logits
    save_file({"logits": logits.float().contiguous()}, os.path.join(args.out, "logits.safetensors"))
    merged = loaded.merge_and_unload()
    tied = merged.config.tie_word_embeddings
    save_file({k: v.float().contiguous() for k, v in merged.state_dict().items() if not (tied and k == "lm_head.weight")},
              os.path.join(args.out, "merged.safetensors"), metadata={"format": "pt"})
    for f in os.listdir(final_dir):
        os.remove(os.path.join(final_dir, f))
    os.rmdir(final_dir)

    with open(os.path.join(args.out, "train.json"), "w") as f:
        json.dump(dict(steps=STEPS, batch_per_step=BATCH, seq_len=T, **HP, lora=LORA, input_ids=ids.tolist(),
                       labels=labels.tolist(), loss=losses, grad_norm=norms, lr_per_step=lrs,
                       versions=dict(torch=torch.__version__, transformers=transformers.__version__,
                                     peft=__import__("peft").__version__)), f)


def float64_faithful(model, name):
    """make_golden_arch.py's float64 patches for its models (RMSNorm, rope, eager softmax; BLOOM's softmax)."""
    if name == "qwen2":
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_golden_arch as arch
    arch.HF = transformers
    spec = arch.MODELS[name]
    with torch.no_grad():  # a stock forward of T tokens first, as make_golden_arch.py (longrope picks its factors)
        model(input_ids=torch.zeros(1, T, dtype=torch.long))
    if spec["kind"] == "bloom":
        arch.F.softmax = arch.softmax64
        torch.nn.functional.softmax = arch.softmax64
    elif spec.get("arch") in ("gemma2", "gemma3"):
        arch.patch_gemma(model, spec)
    else:
        arch.patch_llama(model, arch.inv_freq64(spec["rope"], spec["hd"], spec["max_pos"]))
    if arch.PROBLEMS:
        raise SystemExit(f"float64 patches: {arch.PROBLEMS}")


if __name__ == "__main__":
    main()
