"""PyTorch on CPU: the figure beside `fsdp4j bench --set dist.device=cpu`.

Same workload as fsdp4j's bench on CPU ranks: a Llama (transformers' LlamaForCausalLM, SDPA attention) with random
weights (std 0.02), uniform random tokens labelled with themselves, fp32, AdamW (betas 0.9/0.95, weight decay 0.1,
gradient clipping at 1.0 as fsdp4j's defaults), one process using every core it is given (torch.set_num_threads),
warmup steps then timed steps. `--model tiny` is fsdp4j's preset `tiny` (the README's demo model); any other value is
a directory holding a Hugging Face config.json (tools/peers/llama-40m: hidden 512, 8 layers, vocab 32000).

`--compile 1` runs the model through torch.compile (inductor's CPU code; the first warmup steps compile it, so give
it warmup steps), as the GPU peers' `--compile 1` does: PyTorch's strongest form, reported beside the eager one.

Run: python tools/peers/cpu_llama_bench.py --model tiny --seq 64 --batch 16
     python tools/peers/cpu_llama_bench.py --model tools/peers/llama-40m --seq 256 --batch 4
Prints one JSON line with the fsdp4j bench field names (tok_s, step_s, loss, params, ...).
"""
import argparse
import json
import os
import time

import torch

# fsdp4j's ModelConfig.tiny(): vocab, hidden, intermediate, layers, heads, kv heads, head size, rope theta, eps
TINY = dict(vocab_size=256, hidden_size=128, intermediate_size=352, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
            max_position_embeddings=1024)


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="tiny", help="'tiny' or a directory with a Llama config.json")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=16, help="sequences a step")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--compile", type=int, default=0, help="1: the model through torch.compile")
    return p.parse_args()


def main():
    args = parse()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    from transformers import LlamaConfig, LlamaForCausalLM

    if args.model == "tiny":
        config = LlamaConfig(**TINY)
    else:
        config = LlamaConfig.from_pretrained(args.model)
    config.use_cache = False
    config.initializer_range = 0.02
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config).float().train()
    params = sum(t.numel() for t in model.parameters())
    step_model = torch.compile(model) if args.compile else model
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(args.seed)
    timed, loss = 0.0, float("nan")
    for step in range(args.warmup + args.steps):
        ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), generator=gen)
        start = time.perf_counter()
        out = step_model(input_ids=ids, labels=ids)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss = out.loss.item()
        if step >= args.warmup:
            timed += time.perf_counter() - start
    tokens = args.steps * args.batch * args.seq
    line = {"impl": "pytorch", "model": args.model, "params": params, "world": 1, "seq": args.seq,
            "batch": args.batch, "steps": args.steps, "loss": loss, "tok_s": tokens / timed,
            "step_s": timed / args.steps, "threads": args.threads, "torch": torch.__version__, "device": "cpu", "compiled": bool(args.compile)}
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
