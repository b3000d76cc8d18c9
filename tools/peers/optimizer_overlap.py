"""Can AdamW's memory-bound update run beside the forward's matrix products on one GPU?

Times, with PyTorch on the GPU machine, at Qwen2.5-7B's layer shapes (seq 2048, bf16 products):
  - the forward products of L layers alone (q|k|v, o, gate|up, down, on the compute stream);
  - fused AdamW (torch._fused_adamw_) over L layers' fp32 shards alone;
  - both at once, the products on a high-priority stream and AdamW on a low-priority one;
and prints how much of the shorter one the concurrent run hides. Decides whether fsdp4j should update each unit's
shard on a side stream while the next step's forward runs (docs/benchmarks.md).

Usage (GPU machine): /opt/torch/.venv/bin/python tools/peers/optimizer_overlap.py [--layers 12] [--repeat 5]
"""
import argparse
import json

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--tokens", type=int, default=2048)
    a = p.parse_args()
    dev = torch.device("cuda")
    c, f, qkv = 3584, 18944, 4608
    x = torch.randn(a.tokens, c, device=dev, dtype=torch.bfloat16)
    mid = torch.randn(a.tokens, f, device=dev, dtype=torch.bfloat16)
    w = {
        "qkv": torch.randn(qkv, c, device=dev, dtype=torch.bfloat16) * 0.02,
        "o": torch.randn(c, c, device=dev, dtype=torch.bfloat16) * 0.02,
        "gate_up": torch.randn(2 * f, c, device=dev, dtype=torch.bfloat16) * 0.02,
        "down": torch.randn(c, f, device=dev, dtype=torch.bfloat16) * 0.02,
    }
    layer_params = qkv * c + c * c + 2 * f * c + c * f
    shards = []
    for _ in range(a.layers):
        shards.append([torch.randn(layer_params, device=dev) * 0.02 for _ in range(4)])  # param, grad, m, v
    steps = torch.tensor(1.0, device=dev)

    def products():
        for _ in range(a.layers):
            h = x @ w["qkv"].t()
            h = x @ w["o"].t()
            h = x @ w["gate_up"].t()
            h = mid @ w["down"].t()
        return h

    def adamw():
        for p_, g, m, v in shards:
            torch._fused_adamw_([p_], [g], [m], [v], [], [steps], lr=1e-5, beta1=0.9, beta2=0.95, weight_decay=0.1,
                                eps=1e-8, amsgrad=False, maximize=False)

    high = torch.cuda.Stream(priority=-1)
    low = torch.cuda.Stream(priority=0)

    def timed(fn):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    def both():
        cur = torch.cuda.current_stream()
        high.wait_stream(cur)
        low.wait_stream(cur)
        with torch.cuda.stream(low):
            adamw()
        with torch.cuda.stream(high):
            products()
        cur.wait_stream(high)
        cur.wait_stream(low)

    def interleaved():  # one unit's update beside the next unit's products, as an engine would issue them
        cur = torch.cuda.current_stream()
        high.wait_stream(cur)
        low.wait_stream(cur)
        for i in range(a.layers):
            with torch.cuda.stream(low):
                p_, g, m, v = shards[i]
                torch._fused_adamw_([p_], [g], [m], [v], [], [steps], lr=1e-5, beta1=0.9, beta2=0.95, weight_decay=0.1,
                                    eps=1e-8, amsgrad=False, maximize=False)
            with torch.cuda.stream(high):
                x @ w["qkv"].t(); x @ w["o"].t(); x @ w["gate_up"].t(); mid @ w["down"].t()
        cur.wait_stream(high)
        cur.wait_stream(low)

    for fn in (products, adamw, both, interleaved):
        timed(fn)  # warm up
    rows = {"products": [], "adamw": [], "both": [], "interleaved": []}
    for _ in range(a.repeat):
        rows["products"].append(timed(products))
        rows["adamw"].append(timed(adamw))
        rows["both"].append(timed(both))
        rows["interleaved"].append(timed(interleaved))
    best = {k: min(v) for k, v in rows.items()}
    serial = best["products"] + best["adamw"]
    out = {
        "device": torch.cuda.get_device_name(),
        "layers": a.layers,
        "products_ms": best["products"],
        "adamw_ms": best["adamw"],
        "serial_ms": serial,
        "concurrent_ms": best["both"],
        "interleaved_ms": best["interleaved"],
        "hidden_ms": serial - best["both"],
        "hidden_of_shorter": (serial - best["both"]) / min(best["products"], best["adamw"]),
        "interleaved_hidden_ms": serial - best["interleaved"],
        "products_tflops": 2 * a.layers * a.tokens * (qkv * c + c * c + 2 * f * c + c * f) / best["products"] / 1e9,
        "adamw_tb_s": 28 * a.layers * layer_params / best["adamw"] / 1e9,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
