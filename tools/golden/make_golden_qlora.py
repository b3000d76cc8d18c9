#!/usr/bin/env python3
"""Make the QLoRA fixtures for fsdp4j: NF4 as bitsandbytes stores it, and PEFT's LoRA on its dequantized base.

bitsandbytes does not install here (no wheel in this machine's package index), so its published algorithm is
written out below, from its CUDA kernels kQuantizeBlockwise / kDequantizeBlockwise (csrc/kernels.cu) with
quant_type "nf4", blocksize 64, no double quantization:

  * absmax of each block of 64 consecutive elements (of the flattened weight), kept in fp32;
  * each element scaled by the reciprocal 1 / absmax, both fp32 (a product, not a division: the kernel stores
    1.0f / absmax and multiplies);
  * the 4-bit code of the scaled value by dQuantizeNF4's comparison tree: its 15 thresholds (fp32 literals, halfway
    between neighbouring codes) are tested with `x > t`, so the code is the number of thresholds below x (a value on
    a threshold takes the lower code; NaN, from an all-zero block's 0 * inf, takes code 0);
  * two codes a byte, element 2k in the high nibble of byte k (`qvals[j] = q(vals[2j]) << 4 | q(vals[2j+1])`);
  * dequantized: nf4_dequantization_lut[code] * absmax in fp32, then rounded to the output dtype (bf16: rne).

Here the code is found as a count of thresholds (numpy), not by the tree, an independent reading of the same rule;
the script checks the two agree on every value it writes. The thresholds are the kernel's fp32 literals, each decimal
rounded once to fp32 (as nvcc does): through a double, -0.8480964004993439 and others land one ulp away, and values
on them quantize differently.

Writes under src/test/resources/golden:

  nf4/nf4.safetensors   `weight` (F32, 8 x 64: random normal, an all-zero block, a block with a single non-zero,
                        values on and beside every threshold) and `weight_hf` (4 x 64 bf16 values, as a Hugging Face
                        checkpoint's), for each (suffix "" and "_hf"):
                        `codes` U8 (n/2, 1) as bitsandbytes' Params4bit holds them, `absmax` F32 (n/64),
                        `dequantized` F32 (code * absmax), `dequantized_bf16` BF16 (the same rounded, as with
                        bnb_4bit_compute_dtype bf16)
  qwen2-qlora/          make_golden_lora.py's fixture (12 AdamW steps of PEFT's LoRA, all-linear, rank 4) on the qwen2
                        golden model whose block linears are replaced by their NF4 round trip (dequantize(quantize(W)),
                        fp32): QLoRA's arithmetic in float64. merged.safetensors is that base with the adapters merged.

Run (needs torch, transformers, peft, numpy, safetensors):  python tools/golden/make_golden_qlora.py
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.numpy import load_file, save_file

NF4_CODE = np.array([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
    -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
    0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
    0.7229568362236023, 1.0], dtype=np.float32)
# dQuantizeNF4's thresholds, ascending (each the midpoint of two neighbouring codes), as the fp32 literals of its
# source: each decimal rounded once, straight to fp32, as nvcc (and javac) round `0.8614784181118011f`. Not through
# a double: decimal -> double -> float rounds some of them (they are not fp32 values) one ulp away.
THRESHOLD_LITERALS = (
    "-0.8480964004993439", "-0.6106329262256622", "-0.4599952697753906", "-0.33967943489551544",
    "-0.23460740596055984", "-0.13791173323988914", "-0.045525018125772476", "0.03979014977812767",
    "0.1202552504837513", "0.2035212516784668", "0.2920137718319893", "0.3893125355243683", "0.5016634166240692",
    "0.6427869200706482", "0.8614784181118011")


def fp32_literal(text):
    """The fp32 value nearest the decimal text (ties to even), as a C or Java compiler rounds a float literal."""
    from fractions import Fraction
    exact = Fraction(text)
    f = np.float32(float(text))
    candidates = [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - exact), int(c.view(np.uint32)) & 1))


NF4_THRESHOLDS = np.array([fp32_literal(t) for t in THRESHOLD_LITERALS], dtype=np.float32)
BLOCK = 64
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def tree_code(x):
    """dQuantizeNF4 as the kernel writes it, for one fp32 value (the check of the vectorised count)."""
    t = [float(v) for v in NF4_THRESHOLDS]
    if x > t[7]:
        if x > t[11]:
            if x > t[13]:
                return 15 if x > t[14] else 14
            return 13 if x > t[12] else 12
        if x > t[9]:
            return 11 if x > t[10] else 10
        return 9 if x > t[8] else 8
    if x > t[3]:
        if x > t[5]:
            return 7 if x > t[6] else 6
        return 5 if x > t[4] else 4
    if x > t[1]:
        return 3 if x > t[2] else 2
    return 1 if x > t[0] else 0


def quantize(w):
    """(packed uint8 codes, fp32 absmax) of an fp32 array whose size is a multiple of 64, as bitsandbytes makes them."""
    flat = np.ascontiguousarray(w, dtype=np.float32).reshape(-1, BLOCK)
    absmax = np.abs(flat).max(axis=1).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = (np.float32(1.0) / absmax).astype(np.float32)
        scaled = (flat * scale[:, None]).astype(np.float32)
    codes = (scaled[..., None] > NF4_THRESHOLDS).sum(axis=-1).astype(np.uint8)  # NaN > t is False: code 0
    for x, c in zip(scaled.reshape(-1), codes.reshape(-1)):
        assert tree_code(float(x)) == c, (x, c)
    codes = codes.reshape(-1)
    packed = (codes[0::2] << 4) | codes[1::2]
    return packed.astype(np.uint8), absmax


def dequantize(packed, absmax):
    """fp32 values code * absmax (element 2k from the high nibble of byte k)."""
    codes = np.empty(packed.size * 2, dtype=np.uint8)
    codes[0::2] = packed >> 4
    codes[1::2] = packed & 15
    return (NF4_CODE[codes].reshape(-1, BLOCK) * absmax[:, None]).astype(np.float32).reshape(-1)


def to_bf16(x):
    return torch.from_numpy(np.ascontiguousarray(x)).to(torch.bfloat16)


def nf4_fixture(out_dir):
    g = np.random.default_rng(3201)
    w = g.standard_normal((8, BLOCK)).astype(np.float32) * 0.05
    w[2] = 0.0  # an all-zero block: absmax 0, every code 0, dequantized -0.0
    w[3] = 0.0
    w[3, 17] = -0.25  # one non-zero: it is -absmax, code 0; the rest 0, code 7
    # on and beside every threshold: x = t * absmax with absmax 1 (the block's first element), then the next floats
    w[4, 0] = 1.0
    w[4, 1:16] = NF4_THRESHOLDS
    w[4, 16:31] = np.nextafter(NF4_THRESHOLDS, np.float32(2))
    w[4, 31:46] = np.nextafter(NF4_THRESHOLDS, np.float32(-2))
    # the same at absmax 3: scaled by the fp32 reciprocal of 3, where rounding decides the side
    w[5, 0] = -3.0
    w[5, 1:16] = (NF4_THRESHOLDS * np.float32(3)).astype(np.float32)
    w[5, 16:31] = np.nextafter(w[5, 1:16], np.float32(4))
    w[5, 31:46] = np.nextafter(w[5, 1:16], np.float32(-4))
    wb = to_bf16(g.standard_normal((4, BLOCK)).astype(np.float32) * 0.02).float().numpy()  # bf16 values, as HF weights
    tensors = {}
    for suffix, weight in (("", w), ("_hf", wb)):
        packed, absmax = quantize(weight)
        deq = dequantize(packed, absmax)
        tensors["weight" + suffix] = weight
        tensors["codes" + suffix] = packed.reshape(-1, 1)
        tensors["absmax" + suffix] = absmax
        tensors["dequantized" + suffix] = deq.reshape(weight.shape)
        tensors["dequantized_bf16" + suffix] = deq.reshape(weight.shape)
    os.makedirs(out_dir, exist_ok=True)
    from safetensors.torch import save_file as save_torch
    save_torch({k: (to_bf16(v) if k.startswith("dequantized_bf16") else torch.from_numpy(np.ascontiguousarray(v)))
                for k, v in tensors.items()}, os.path.join(out_dir, "nf4.safetensors"), metadata={"format": "pt"})


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    golden = os.path.join(here, "..", "..", "src", "test", "resources", "golden")
    nf4_fixture(os.path.join(golden, "nf4"))
    with tempfile.TemporaryDirectory() as base:
        shutil.copy(os.path.join(golden, "qwen2", "config.json"), base)
        weights = load_file(os.path.join(golden, "qwen2", "model.safetensors"))
        for name, value in weights.items():
            if name.startswith("model.layers.") and name.endswith(".weight") and name.split(".")[-2] in LINEARS:
                packed, absmax = quantize(value)
                weights[name] = dequantize(packed, absmax).reshape(value.shape)
        save_file(weights, os.path.join(base, "model.safetensors"), metadata={"format": "pt"})
        subprocess.run([sys.executable, os.path.join(here, "make_golden_lora.py"), "--model", "qwen2", "--base", base,
                        "--out", os.path.join(golden, "qwen2-qlora")], check=True)


if __name__ == "__main__":
    main()
