"""PyTorch's causal attention rates on this GPU, as a yardstick for fsdp4j's attention kernels.

Times torch.nn.functional.scaled_dot_product_attention (bf16, causal, grouped-query) forward and forward+backward
for each backend PyTorch offers (flash, cuDNN, memory-efficient) at the attention shapes of the Qwen2.5 presets,
Llama-3-8B and Mistral-7B, and prints TFLOP/s by fsdp4j's convention (docs/plan.md): causal forward
4 * heads * head_dim * (T + 1) / 2 per token, backward 2.5 times that. Mistral-7B (v0.1, fsdp4j's preset) attends within
a window of 4096 tokens: past 4096 its attention is given as a boolean mask (the backends that take no mask say "not
available") and its FLOPs count the pairs within the window. Run on the GPU machine:
python3 attention_rates.py [--seq 2048 4096]
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = {  # heads, kv heads, head dim, sliding window (0: none)
    "qwen2.5-7b": (28, 4, 128, 0),
    "qwen2.5-1.5b": (12, 2, 128, 0),
    "qwen2.5-0.5b": (14, 2, 64, 0),
    "llama-3-8b": (32, 8, 128, 0),
    "mistral-7b": (32, 8, 128, 4096),
}
BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def timed(fn, warmup=3, repeats=20):
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq", type=int, nargs="+", default=[2048, 4096])
    args = parser.parse_args()
    print(torch.cuda.get_device_name(0), "torch", torch.__version__)
    for name, (nh, nkv, hs, window) in SHAPES.items():
        for t in args.seq:
            windowed = 0 < window < t
            pairs = window * (window + 1) / 2 + (t - window) * window if windowed else t * (t + 1) / 2
            fwd_flops = 4 * nh * hs * pairs
            mask = None
            if windowed:  # query i sees keys i - window + 1 .. i
                i = torch.arange(t, device="cuda")
                mask = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - window)
            q = torch.randn(1, nh, t, hs, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            k = torch.randn(1, nkv, t, hs, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            v = torch.randn(1, nkv, t, hs, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            dout = torch.randn(1, nh, t, hs, device="cuda", dtype=torch.bfloat16)
            k_all = k.detach().repeat_interleave(nh // nkv, dim=1).requires_grad_()
            v_all = v.detach().repeat_interleave(nh // nkv, dim=1).requires_grad_()
            for backend_name, backend in [(b + " gqa", v_) for b, v_ in BACKENDS.items()] + \
                    [(b + " kv repeated", v_) for b, v_ in BACKENDS.items()]:
                gqa = backend_name.endswith("gqa")
                try:
                    with sdpa_kernel(backend):
                        def forward():
                            if gqa:
                                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None,
                                                                      enable_gqa=True)
                            return F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask,
                                                                  is_causal=mask is None)

                        def both():
                            out = forward()
                            out.backward(dout)

                        f_ms = timed(lambda: forward())
                        fb_ms = timed(both)
                    b_ms = fb_ms - f_ms
                    print(f"{name} seq {t} {backend_name}: forward {f_ms:.3f} ms {fwd_flops / f_ms / 1e9:.0f} TFLOP/s, "
                          f"backward {b_ms:.3f} ms {2.5 * fwd_flops / b_ms / 1e9:.0f} TFLOP/s")
                except Exception as e:  # a backend that does not take this shape here
                    print(f"{name} seq {t} {backend_name}: not available ({str(e).splitlines()[0][:100]})")


if __name__ == "__main__":
    main()
