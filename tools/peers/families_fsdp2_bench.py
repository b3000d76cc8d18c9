# Peer benchmark for every model family fsdp4j presets: PyTorch FSDP2 (fully_shard) training throughput, the same
# method as ../shared/peers/pytorch_fsdp2_bench.py (random weights N(0, 0.02), synthetic tokens, seq 2048, batch 1 per
# GPU, activation checkpointing per block, bf16 params, fp32 gradient reduction, fused AdamW, one JSON line with the
# same field names), with the model named by its fsdp4j preset (`model.preset`): qwen2.5-*, qwen3-*, llama-3-8b,
# mistral-7b, gemma-2-*, gemma-3-*, phi-3-*. The shapes below are ModelConfig.preset's (src/main/java/io/fsdp4j/model/
# ModelConfig.java); transformers' own classes build the model (Qwen3ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM...).
# Runs on the GPU machine, where PyTorch and transformers are installed.
# Usage: torchrun --standalone --nproc_per_node=N families_fsdp2_bench.py --model qwen3-8b [--ac 0|1] [--seq 2048]
#        [--warmup 3] [--steps 10] [--attn sdpa|eager] [--out FILE] [--blocks-not-checkpointed N] [--grad-accum N]
#        --blocks-not-checkpointed N (with --ac 1): the last N blocks keep every activation, as fsdp4j's
#        fsdp.blocks_not_checkpointed: the checkpoint wrapper on the others only.
#        --grad-accum N: N micro-batches a step (fsdp4j's train.grad_accum), the gradients reduced after the last
#        only (FSDP2's set_requires_gradient_sync), the loss of each divided by N; tokens count every micro-batch.
#        --attn defaults to sdpa, and to eager for gemma-2-* (PyTorch's sdpa has no soft cap of the scores).
#        --list prints the preset names and exits (no GPU needed).
import argparse, json, os, sys, time

QWEN3 = dict(vocab_size=151936, head_dim=128, rope_theta=1e6, rms_norm_eps=1e-6,
             max_position_embeddings=40960)
GEMMA3 = dict(rms_norm_eps=1e-6, rope_theta=1e6, rope_local_base_freq=1e4, sliding_window_pattern=6,
              hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, pad_token_id=0)
GEMMA2 = dict(vocab_size=256000, rms_norm_eps=1e-6, rope_theta=1e4, sliding_window=4096, max_position_embeddings=8192,
              attn_logit_softcapping=50.0, final_logit_softcapping=30.0, hidden_activation="gelu_pytorch_tanh",
              tie_word_embeddings=True, pad_token_id=0)
PHI3 = dict(vocab_size=32064, rope_theta=1e4, rms_norm_eps=1e-5, max_position_embeddings=4096, sliding_window=2047,
            pad_token_id=None, tie_word_embeddings=False)


def shape(h, f, l, nh, nkv, **more):
    return dict(hidden_size=h, intermediate_size=f, num_hidden_layers=l, num_attention_heads=nh,
                num_key_value_heads=nkv, **more)


# preset -> (transformers model class, config class, config keys)
PRESETS = {
    "qwen2.5-0.5b": ("Qwen2ForCausalLM", "Qwen2Config", shape(896, 4864, 24, 14, 2, vocab_size=151936, rope_theta=1e6,
                                                                 tie_word_embeddings=True)),
    "qwen2.5-1.5b": ("Qwen2ForCausalLM", "Qwen2Config", shape(1536, 8960, 28, 12, 2, vocab_size=151936, rope_theta=1e6,
                                                                 tie_word_embeddings=True)),
    "qwen2.5-7b": ("Qwen2ForCausalLM", "Qwen2Config", shape(3584, 18944, 28, 28, 4, vocab_size=152064, rope_theta=1e6,
                                                               tie_word_embeddings=False)),
    "llama-3-8b": ("LlamaForCausalLM", "LlamaConfig", shape(4096, 14336, 32, 32, 8, vocab_size=128256,
                                                               rope_theta=500000.0, tie_word_embeddings=False)),
    "mistral-7b": ("MistralForCausalLM", "MistralConfig", shape(4096, 14336, 32, 32, 8, vocab_size=32000,
                                                                   sliding_window=4096, tie_word_embeddings=False)),
    "qwen3-0.6b": ("Qwen3ForCausalLM", "Qwen3Config", shape(1024, 3072, 28, 16, 8, **QWEN3, tie_word_embeddings=True)),
    "qwen3-1.7b": ("Qwen3ForCausalLM", "Qwen3Config", shape(2048, 6144, 28, 16, 8, **QWEN3, tie_word_embeddings=True)),
    "qwen3-4b": ("Qwen3ForCausalLM", "Qwen3Config", shape(2560, 9728, 36, 32, 8, **QWEN3, tie_word_embeddings=True)),
    "qwen3-8b": ("Qwen3ForCausalLM", "Qwen3Config", shape(4096, 12288, 36, 32, 8, **QWEN3, tie_word_embeddings=False)),
    "qwen3-14b": ("Qwen3ForCausalLM", "Qwen3Config", shape(5120, 17408, 40, 40, 8, **QWEN3, tie_word_embeddings=False)),
    "qwen3-32b": ("Qwen3ForCausalLM", "Qwen3Config", shape(5120, 25600, 64, 64, 8, **QWEN3, tie_word_embeddings=False)),
    "gemma-2-2b": ("Gemma2ForCausalLM", "Gemma2Config", shape(2304, 9216, 26, 8, 4, head_dim=256,
                                                                 query_pre_attn_scalar=256, **GEMMA2)),
    "gemma-2-9b": ("Gemma2ForCausalLM", "Gemma2Config", shape(3584, 14336, 42, 16, 8, head_dim=256,
                                                                 query_pre_attn_scalar=256, **GEMMA2)),
    "gemma-2-27b": ("Gemma2ForCausalLM", "Gemma2Config", shape(4608, 36864, 46, 32, 16, head_dim=128,
                                                                  query_pre_attn_scalar=144, **GEMMA2)),
    "gemma-3-1b": ("Gemma3ForCausalLM", "Gemma3TextConfig", shape(1152, 6912, 26, 4, 1, vocab_size=262144,
                                                                     head_dim=256, query_pre_attn_scalar=256,
                                                                     sliding_window=512, max_position_embeddings=32768,
                                                                     **GEMMA3)),
    "gemma-3-4b": ("Gemma3ForCausalLM", "Gemma3TextConfig", shape(2560, 10240, 34, 8, 4, vocab_size=262208,
                                                                     head_dim=256, query_pre_attn_scalar=256,
                                                                     sliding_window=1024, max_position_embeddings=131072,
                                                                     rope_scaling=dict(rope_type="linear", factor=8.0),
                                                                     **GEMMA3)),
    "gemma-3-12b": ("Gemma3ForCausalLM", "Gemma3TextConfig", shape(3840, 15360, 48, 16, 8, vocab_size=262208,
                                                                      head_dim=256, query_pre_attn_scalar=256,
                                                                      sliding_window=1024, max_position_embeddings=131072,
                                                                      rope_scaling=dict(rope_type="linear", factor=8.0),
                                                                      **GEMMA3)),
    "gemma-3-27b": ("Gemma3ForCausalLM", "Gemma3TextConfig", shape(5376, 21504, 62, 32, 16, vocab_size=262208,
                                                                      head_dim=128, query_pre_attn_scalar=168,
                                                                      sliding_window=1024, max_position_embeddings=131072,
                                                                      rope_scaling=dict(rope_type="linear", factor=8.0),
                                                                      **GEMMA3)),
    "phi-3-mini": ("Phi3ForCausalLM", "Phi3Config", shape(3072, 8192, 32, 32, 32, **PHI3)),
    "phi-3-medium": ("Phi3ForCausalLM", "Phi3Config", shape(5120, 17920, 40, 40, 10, **PHI3)),
}


def build_config(transformers, name, seq, layers=0):
    model_class, config_class, keys = PRESETS[name]
    keys = dict(keys, use_cache=False)
    if layers:
        keys["num_hidden_layers"] = layers
    keys.setdefault("max_position_embeddings", max(32768, seq))
    return getattr(transformers, model_class), getattr(transformers, config_class)(**keys)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-8b"); ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--warmup", type=int, default=3); ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--ac", type=int, default=1); ap.add_argument("--out", default="")
    ap.add_argument("--attn", default=""); ap.add_argument("--list", action="store_true")
    ap.add_argument("--compile", type=int, default=0, help="1: torch.compile each decoder block, as the shared peer")
    ap.add_argument("--layers", type=int, default=0, help="the first N blocks only (fsdp4j: model.layers=N); 0: all")
    ap.add_argument("--grad-accum", type=int, default=1, help="micro-batches a step (fsdp4j: train.grad_accum=N)")
    ap.add_argument("--blocks-not-checkpointed", type=int, default=0,
                    help="with --ac 1: the last N blocks not checkpointed (fsdp4j: fsdp.blocks_not_checkpointed=N)")
    a = ap.parse_args()
    if a.list:
        print("\n".join(PRESETS))
        return
    if a.model not in PRESETS:
        sys.exit(f"error: unknown --model '{a.model}'; presets: {', '.join(PRESETS)}")
    import torch, torch.distributed as dist, transformers
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper, CheckpointImpl
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    model_class, cfg = build_config(transformers, a.model, a.seq, a.layers)
    a.attn = a.attn or ("eager" if a.model.startswith("gemma-2") else "sdpa")
    cfg._attn_implementation = a.attn
    with torch.device("meta"):
        model = model_class(cfg)
    nparams = sum(p.numel() for p in model.parameters())
    layers = model.model.layers
    if a.ac:
        for i, blk in enumerate(layers):
            if i < len(layers) - a.blocks_not_checkpointed:
                layers[i] = checkpoint_wrapper(blk, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    mesh = init_device_mesh("cuda", (world,))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for blk in layers:
        if a.compile:
            blk.compile()
        fully_shard(blk, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    model.to_empty(device="cuda")
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
        for m in model.modules():  # buffers built on the meta device: Gemma's embedding scale
            if isinstance(getattr(m, "embed_scale", None), torch.Tensor):
                m.embed_scale.fill_(cfg.hidden_size ** 0.5)
    model.model.rotary_emb = type(model.model.rotary_emb)(config=cfg, device="cuda")  # inv_freq, built on meta
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    g = torch.Generator(device="cuda").manual_seed(1234 + rank)

    def step():
        for micro in range(a.grad_accum):
            model.set_requires_gradient_sync(micro == a.grad_accum - 1)  # reduce after the last micro-batch only
            ids = torch.randint(0, cfg.vocab_size, (1, a.seq), device="cuda", generator=g)
            loss = model(input_ids=ids, labels=ids).loss
            (loss / a.grad_accum).backward()
        opt.step(); opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize(); dist.barrier()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize(); dt = time.perf_counter() - t0
    tokens = a.steps * a.grad_accum * a.seq * world
    L, H = cfg.num_hidden_layers, cfg.num_attention_heads
    Q = getattr(cfg, "head_dim", None) or cfg.hidden_size // H
    flops_per_token = 6 * nparams + 12 * L * H * Q * a.seq / 2  # causal attention counts half (windows not counted)
    peak = 989e12
    res = dict(impl="pytorch-fsdp2", torch=torch.__version__, transformers=transformers.__version__, model=a.model,
               params=nparams, world=world, strategy="full", seq=a.seq, ac=a.ac, blocks_not_checkpointed=a.blocks_not_checkpointed, grad_accum=a.grad_accum, compile=a.compile, layers=cfg.num_hidden_layers, attn=a.attn, steps=a.steps,
               loss=float(loss), tok_s=tokens / dt, tok_s_gpu=tokens / dt / world, step_s=dt / a.steps,
               mfu=flops_per_token * tokens / dt / world / peak,
               peak_alloc_gib=torch.cuda.max_memory_allocated() / 2**30,
               peak_reserved_gib=torch.cuda.max_memory_reserved() / 2**30, gpu=torch.cuda.get_device_name())
    mem = torch.tensor([res["peak_reserved_gib"]], device="cuda"); dist.all_reduce(mem, op=dist.ReduceOp.MAX)
    res["peak_reserved_gib_max"] = float(mem)
    if rank == 0:
        print(json.dumps(res), flush=True)
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(res) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
