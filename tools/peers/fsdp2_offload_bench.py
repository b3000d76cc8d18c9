"""PyTorch FSDP2 with CPUOffloadPolicy: the PyTorch figure beside `fsdp4j bench --set fsdp.cpu_offload=true`.

Written for fsdp4j (the shared peer, pytorch_fsdp2_bench.py, has no offload option). Same workload as that peer and as
fsdp4j's bench: a Qwen2.5-architecture model with random weights (std 0.02), synthetic tokens labelled with
themselves, seq 2048, batch 1 per GPU, activation checkpointing per decoder block, bf16 parameters and fp32 gradient
reduction; here every block and the root are sharded with `offload_policy=CPUOffloadPolicy()` (parameters, gradients
and optimizer state in pinned host memory, AdamW stepping on the host). `--layers` shortens the 7B shapes, as
fsdp4j's preset `qwen2.5-7b-20l` does (20 layers).

Run: torchrun --standalone --nproc_per_node=1 tools/peers/fsdp2_offload_bench.py --layers 20 --warmup 1 --steps 3
Prints one JSON line with the fsdp4j bench field names.
"""
import argparse
import json
import os
import resource
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

SHAPES_7B = dict(hidden_size=3584, intermediate_size=18944, num_attention_heads=28, num_key_value_heads=4,
                 vocab_size=152064, tie_word_embeddings=False)


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=20)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    return p.parse_args()


def main():
    args = parse()
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding

    config = Qwen2Config(num_hidden_layers=args.layers, max_position_embeddings=32768, use_cache=False, **SHAPES_7B)
    config._attn_implementation = "sdpa"
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config)
    params = sum(t.numel() for t in model.parameters())
    layers = model.model.layers
    for i in range(len(layers)):
        layers[i] = checkpoint_wrapper(layers[i], checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    mesh = init_device_mesh("cuda", (world,))
    precision = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    offload = CPUOffloadPolicy()  # pinned host memory for parameters, gradients and optimizer state
    for block in layers:
        fully_shard(block, mesh=mesh, mp_policy=precision, offload_policy=offload)
    fully_shard(model, mesh=mesh, mp_policy=precision, offload_policy=offload)
    model.to_empty(device="cpu")  # sharded parameters live on the host
    with torch.no_grad():
        for t in model.parameters():
            t.normal_(0.0, 0.02)
    model.model.rotary_emb = Qwen2RotaryEmbedding(config=config, device="cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)  # host tensors: PyTorch's CPU AdamW
    generator = torch.Generator(device="cuda").manual_seed(4321 + rank)

    def train_step():
        ids = torch.randint(0, config.vocab_size, (1, args.seq), device="cuda", generator=generator)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for _ in range(args.warmup):
        train_step()
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = train_step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    tokens = args.steps * args.seq * world
    heads, head_dim = config.num_attention_heads, config.hidden_size // config.num_attention_heads
    flops_per_token = 6 * params + 12 * args.layers * heads * head_dim * args.seq / 2
    line = dict(impl="pytorch-fsdp2-cpu-offload", torch=torch.__version__, model=f"qwen2.5-7b-{args.layers}l",
                params=params, world=world, seq=args.seq, ac=1, steps=args.steps, loss=float(loss),
                tok_s=tokens / seconds, tok_s_gpu=tokens / seconds / world, step_s=seconds / args.steps,
                mfu=flops_per_token * tokens / seconds / world / 989e12,
                peak_reserved_gib=torch.cuda.max_memory_reserved() / 2**30,
                host_peak_rss_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                gpu=torch.cuda.get_device_name())
    if rank == 0:
        print(json.dumps(line), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
