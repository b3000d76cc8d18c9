"""GPU check of the CUDA kernels in src/main/resources/kernels (a developer tool; no part of the product).

Compiles each .cu with plain NVRTC (options: --gpu-architecture=sm_90 -std=c++17, no include path; the shared
header common.cuh handed over by name, as io.fsdp4j.cuda.CudaKernels does), loads the
cubin and launches every kernel exactly as its header's contract says, comparing against float64 references
(numpy / torch). Needs cupy, cuda-bindings and torch (all on the device machine's image):

    python3 tools/kernels/test_kernels.py [--bench] [--only NAME] [--small]

--only runs the tests whose function name contains NAME (e.g. attention); --small shrinks the attention cases
(for compute-sanitizer, e.g. `compute-sanitizer --tool racecheck python3 ... --only attention --small`).
"""
import math
import os
import sys
import tempfile

import numpy as np
import cupy as cp
import torch

KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../src/main/resources/kernels")
I32, I64, F32 = np.int32, np.int64, np.float32
failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("  " + detail if detail else ""), flush=True)
    if not ok:
        failures.append(name)


# ---- compilation: plain NVRTC, as the Java backend does ----------------------------------------------------

def nvrtc_cubin(path):
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        return None
    src = open(path, "rb").read()
    header = open(os.path.join(KERNELS, "common.cuh"), "rb").read()
    err, prog = nvrtc.nvrtcCreateProgram(src, os.path.basename(path).encode(), 1, [header], [b"common.cuh"])
    opts = [b"--gpu-architecture=sm_90", b"-std=c++17"]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"NVRTC failed on {path}: {log.decode(errors='replace')}")
    if log.strip(b" \0\n"):
        print(f"NVRTC log for {os.path.basename(path)}: {log.decode(errors='replace')}")
    _, size = nvrtc.nvrtcGetCUBINSize(prog)
    cubin = b" " * size
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    return cubin


modules = {}


def fn(module, name, shared=0):
    if module not in modules:
        path = os.path.join(KERNELS, module + ".cu")
        cubin = nvrtc_cubin(path)
        if cubin is None:  # no cuda-bindings: CuPy's own NVRTC path
            modules[module] = cp.RawModule(code=open(path).read(), options=("-std=c++17", "-I" + KERNELS),
                                           backend="nvrtc")
        else:
            with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
                f.write(cubin)
            modules[module] = cp.RawModule(path=f.name)
    f = modules[module].get_function(name)
    if shared > 48 * 1024:
        f.max_dynamic_shared_size_bytes = shared
    return f


def launch(module, name, grid, block, args, shared=0):
    fn(module, name, shared)(grid, block, args, shared_mem=shared)


def cdiv(a, b):
    return (a + b - 1) // b


# ---- bf16 helpers (the same rounding as io.fsdp4j.tensor.Half) --------------------------------------------

def to_bf16(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    r = np.where(nan, (u >> 16) | 0x40, r)
    return r.astype(np.uint16)


def from_bf16(h):
    return (np.asarray(h).astype(np.uint32) << 16).view(np.float32)


def rnd(x):
    return from_bf16(to_bf16(x))


def close(a, b, tol):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    scale = max(1e-30, float(np.max(np.abs(b))))
    err = float(np.max(np.abs(a - b))) / scale if a.size else 0.0
    return err <= tol, f"max abs err / max abs = {err:.3g} (tol {tol})"


rng = np.random.default_rng(1234)


def randn(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ---- elementwise.cu ------------------------------------------------------------------------------------------

def test_elementwise():
    m = "elementwise"
    special = np.array([0.0, -0.0, 1.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3.0e38, 1.00390625,
                        1.01171875, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8], dtype=np.float32)
    x = np.concatenate([special, randn(100000, scale=10)])
    n = x.size
    g, b = (cdiv(n, 256),), (256,)
    d = cp.zeros(n, dtype=cp.uint16)
    launch(m, "cast_f32_to_bf16", g, b, (d, cp.asarray(x), I64(n)))
    check("cast_f32_to_bf16 bits", np.array_equal(d.get(), to_bf16(x)))
    h = to_bf16(x)
    f = cp.zeros(n, dtype=cp.float32)
    launch(m, "cast_bf16_to_f32", (7,), b, (f, cp.asarray(h), I64(n)))  # any grid works
    check("cast_bf16_to_f32 bits", np.array_equal(f.get().view(np.uint32), from_bf16(h).view(np.uint32)))
    f = cp.zeros(n, dtype=cp.float32)
    launch(m, "fill_f32", g, b, (f, I64(n - 1), F32(2.5)))
    check("fill_f32", np.all(f.get()[:-1] == 2.5) and f.get()[-1] == 0)
    d = cp.zeros(n, dtype=cp.uint16)
    launch(m, "fill_bf16", g, b, (d, I64(n), F32(1.0 + 2 ** -8)))
    check("fill_bf16", np.all(d.get() == to_bf16(np.float32(1.0 + 2 ** -8))))
    i = cp.zeros(n, dtype=cp.int32)
    launch(m, "fill_i32", g, b, (i, I64(n), I32(-7)))
    check("fill_i32", np.all(i.get() == -7))
    a, s = randn(n), randn(n)
    for dname, sname in [("f32", "f32"), ("f32", "bf16"), ("bf16", "f32"), ("bf16", "bf16")]:
        dd = cp.asarray(a) if dname == "f32" else cp.asarray(to_bf16(a))
        ss = cp.asarray(s) if sname == "f32" else cp.asarray(to_bf16(s))
        launch(m, f"add_{dname}_{sname}", g, b, (dd, ss, I64(n)))
        av = a if dname == "f32" else rnd(a)
        sv = s if sname == "f32" else rnd(s)
        want = (av + sv).astype(np.float32)
        got = dd.get() if dname == "f32" else from_bf16(dd.get())
        if dname == "bf16":
            want = rnd(want)
        check(f"add_{dname}_{sname} exact", np.array_equal(got, want))
    t = cp.asarray(a)
    launch(m, "scale_f32", g, b, (t, I64(n), F32(0.37)))
    check("scale_f32 exact", np.array_equal(t.get(), (a * np.float32(0.37)).astype(np.float32)))
    t = cp.asarray(to_bf16(a))
    launch(m, "scale_bf16", g, b, (t, I64(n), F32(0.37)))
    check("scale_bf16 exact", np.array_equal(from_bf16(t.get()), rnd(rnd(a) * np.float32(0.37))))
    for dt in ["f32", "bf16"]:
        xs = cp.asarray(a) if dt == "f32" else cp.asarray(to_bf16(a))
        ref = np.sum((a if dt == "f32" else rnd(a)).astype(np.float64) ** 2)
        results = []
        for _ in range(2):
            parts = cp.zeros(1000, dtype=cp.float64)
            G = min(cdiv(n, 256), 1024)
            launch(m, f"sumsq_partial_{dt}", (G,), (256,), (parts, xs, I64(n)))
            out = cp.zeros(1, dtype=cp.float64)
            launch(m, "sumsq_final", (1,), (256,), (out, parts, I32(G)))
            results.append(float(out.get()[0]))
        check(f"sumsq_{dt}", abs(results[0] - ref) <= 1e-12 * ref and results[0] == results[1],
              f"{results} vs {ref}")


# ---- embedding.cu --------------------------------------------------------------------------------------------

def test_embedding():
    m = "embedding"
    N, C, V = 3000, 200, 50
    ids = rng.integers(0, V, N).astype(np.int32)
    ids[100:1500] = 7  # a long run of one id across chunks
    table = randn(V, C)
    for dt in ["f32", "bf16"]:
        tab = cp.asarray(table) if dt == "f32" else cp.asarray(to_bf16(table))
        out = cp.zeros((N, C), dtype=cp.float32 if dt == "f32" else cp.uint16)
        launch(m, f"embedding_forward_{dt}", (N,), (256,), (out, cp.asarray(ids), tab, I32(N), I32(C), I32(V)))
        got = out.get() if dt == "f32" else out.get()
        want = table[ids] if dt == "f32" else to_bf16(table)[ids]
        check(f"embedding_forward_{dt}", np.array_equal(got, want))
        dOut = randn(N, C)
        dOutUsed = dOut if dt == "f32" else rnd(dOut)
        start = randn(V, C)
        want = start.copy()
        for r in range(N):  # the CPU backend's sequential order
            want[ids[r]] += dOutUsed[r]
        got = []
        for _ in range(2):
            dTable = cp.asarray(start)
            src = cp.asarray(dOut) if dt == "f32" else cp.asarray(to_bf16(dOut))
            launch(m, f"embedding_backward_{dt}", (N,), (256,),
                   (dTable, cp.asarray(ids), src, I32(N), I32(C), I32(V)))
            got.append(dTable.get())
        check(f"embedding_backward_{dt} bitwise = sequential CPU order", np.array_equal(got[0], want)
              and np.array_equal(got[0], got[1]), str(np.max(np.abs(got[0] - want))))


# ---- rmsnorm.cu ----------------------------------------------------------------------------------------------

def test_rmsnorm():
    m = "rmsnorm"
    N, C, eps = 300, 1000, 1e-5
    x, w, g = randn(N, C), randn(C) + 1, randn(N, C)
    for dt, tol in [("f32", 2e-6), ("bf16", 1.6e-2)]:
        enc = (lambda a: cp.asarray(a)) if dt == "f32" else (lambda a: cp.asarray(to_bf16(a)))
        dec = (lambda a: a.get()) if dt == "f32" else (lambda a: from_bf16(a.get()))
        xv, wv, gv = (x, w, g) if dt == "f32" else (rnd(x), rnd(w), rnd(g))
        X, Wt, G = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (xv, wv, gv))
        rstd_ref = 1 / torch.sqrt((X * X).mean(-1, keepdim=True) + eps)
        y = X * rstd_ref * Wt
        y.backward(G)
        out, rstd = cp.zeros((N, C), dtype=cp.float32 if dt == "f32" else cp.uint16), cp.zeros(N, cp.float32)
        launch(m, f"rmsnorm_forward_{dt}", (N,), (256,), (out, rstd, enc(x), enc(w), I32(N), I32(C), F32(eps)))
        check(f"rmsnorm_forward_{dt} out", *close(dec(out), y.detach().numpy(), tol))
        check(f"rmsnorm_forward_{dt} rstd", *close(rstd.get(), rstd_ref.detach().numpy()[:, 0], 2e-6))
        dx = cp.zeros((N, C), dtype=cp.float32 if dt == "f32" else cp.uint16)
        launch(m, f"rmsnorm_backward_{dt}", (N,), (256,), (dx, enc(g), enc(x), enc(w), rstd, I32(N), I32(C)))
        check(f"rmsnorm_backward_{dt} dx", *close(dec(dx), X.grad.numpy(), tol * 2))
        rows = 64
        R = cdiv(N, rows)
        parts = cp.zeros((R, C), dtype=cp.float32)
        launch(m, f"rmsnorm_dweight_partial_{dt}", (cdiv(C, 256), R), (256,),
               (parts, enc(g), enc(x), rstd, I32(N), I32(C), I32(rows)))
        dW0 = randn(C)
        dW = cp.asarray(dW0)
        launch(m, "rmsnorm_dweight_finish", (cdiv(C, 256),), (256,), (dW, parts, I32(R), I32(C), I32(1)))
        check(f"rmsnorm_dweight_{dt} (accumulated)", *close(dW.get() - dW0, Wt.grad.numpy(), 1e-5))


# ---- rope.cu -------------------------------------------------------------------------------------------------

def test_rope():
    m = "rope"
    N, NH, NKV, HS, P = 50, 4, 2, 64, 80
    width = (NH + 2 * NKV) * HS
    half = HS // 2
    pos = rng.integers(0, P, N).astype(np.int32)
    ang = np.outer(np.arange(P), 1.0 / 10000 ** (np.arange(half) / half))
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    x = randn(N, width)
    rot = NH + NKV
    want = x.astype(np.float64).copy()
    c, s = cos[pos][:, None, :], sin[pos][:, None, :]
    heads = want[:, : rot * HS].reshape(N, rot, HS)
    x1, x2 = heads[..., :half].copy(), heads[..., half:].copy()
    heads[..., :half] = x1 * c - x2 * s
    heads[..., half:] = x2 * c + x1 * s
    want[:, : rot * HS] = heads.reshape(N, rot * HS)
    for dt, tol in [("f32", 1e-6), ("bf16", 8e-3)]:
        enc = (lambda a: cp.asarray(a)) if dt == "f32" else (lambda a: cp.asarray(to_bf16(a)))
        dec = (lambda a: a.get()) if dt == "f32" else (lambda a: from_bf16(a.get()))
        xs = enc(x)
        args = (xs, cp.asarray(pos), cp.asarray(cos), cp.asarray(sin), I32(N), I32(width), I32(rot), I32(HS))
        launch(m, f"rope_forward_{dt}", (N,), (128,), args)
        check(f"rope_forward_{dt}", *close(dec(xs), want, tol))
        launch(m, f"rope_backward_{dt}", (N,), (128,), args)
        check(f"rope_backward_{dt} inverts", *close(dec(xs), x if dt == "f32" else rnd(x), tol * 2))


# ---- swiglu.cu -----------------------------------------------------------------------------------------------

def test_swiglu():
    m = "swiglu"
    N, F = 70, 700
    gu, dy = randn(N, 2 * F, scale=3), randn(N, F)
    for dt, tol in [("f32", 2e-6), ("bf16", 8e-3)]:
        enc = (lambda a: cp.asarray(a)) if dt == "f32" else (lambda a: cp.asarray(to_bf16(a)))
        dec = (lambda a: a.get()) if dt == "f32" else (lambda a: from_bf16(a.get()))
        GU = torch.tensor(gu if dt == "f32" else rnd(gu), dtype=torch.float64, requires_grad=True)
        y = torch.nn.functional.silu(GU[:, :F]) * GU[:, F:]
        y.backward(torch.tensor(dy if dt == "f32" else rnd(dy), dtype=torch.float64))
        out = cp.zeros((N, F), dtype=cp.float32 if dt == "f32" else cp.uint16)
        launch(m, f"swiglu_forward_{dt}", (N,), (256,), (out, enc(gu), I32(N), I32(F)))
        check(f"swiglu_forward_{dt}", *close(dec(out), y.detach().numpy(), tol))
        d = cp.zeros((N, 2 * F), dtype=cp.float32 if dt == "f32" else cp.uint16)
        launch(m, f"swiglu_backward_{dt}", (N,), (256,), (d, enc(dy), enc(gu), I32(N), I32(F)))
        check(f"swiglu_backward_{dt}", *close(dec(d), GU.grad.numpy(), tol))


# ---- cross_entropy.cu ----------------------------------------------------------------------------------------

def test_cross_entropy():
    m = "cross_entropy"
    for N, V in [(40, 1000), (6, 152064)]:
        z = randn(N, V, scale=4)
        t = rng.integers(0, V, N).astype(np.int32)
        t[1] = -100
        t[3] = V  # invalid
        for dt, tol in [("f32", 2e-6), ("bf16", 8e-3)]:
            enc = (lambda a: cp.asarray(a)) if dt == "f32" else (lambda a: cp.asarray(to_bf16(a)))
            dec = (lambda a: a.get()) if dt == "f32" else (lambda a: from_bf16(a.get()))
            zv = z if dt == "f32" else rnd(z)
            Z = torch.tensor(zv, dtype=torch.float64, requires_grad=True)
            valid = (t >= 0) & (t < V)
            tt = torch.tensor(np.where(valid, t, 0), dtype=torch.long)
            rowloss = torch.nn.functional.cross_entropy(Z, tt, reduction="none") * torch.tensor(valid)
            scale = 0.125
            (rowloss.sum() * scale).backward()
            want_loss = rowloss.detach().numpy().copy()
            want_loss[~valid] = 0
            want_loss[3] = np.nan
            logits, loss = enc(z), cp.zeros(N, cp.float32)
            launch(m, f"cross_entropy_{dt}", (N,), (1024,), (logits, loss, cp.asarray(t), I32(N), I32(V), F32(scale)))
            got = loss.get()
            ok_nan = np.isnan(got[3]) and got[1] == 0
            mask = valid.copy()
            ok, detail = close(got[mask], want_loss[mask], 1e-5)
            check(f"cross_entropy_{dt} V={V} loss", ok and ok_nan, detail + f" nan-row {got[3]} ignored-row {got[1]}")
            check(f"cross_entropy_{dt} V={V} grad", *close(dec(logits), Z.grad.numpy(), 1e-5 if dt == "f32" else tol))
            logits = enc(z)
            launch(m, f"cross_entropy_{dt}", (N,), (1024,), (logits, loss, cp.asarray(t), I32(N), I32(V), F32(0)))
            check(f"cross_entropy_{dt} V={V} gradScale=0 leaves logits", np.array_equal(dec(logits), zv))
        loss_ok = loss.copy()
        loss_ok[3] = 0
        out = cp.zeros(1, cp.float64)
        launch(m, "cross_entropy_sum", (1,), (1024,), (out, loss_ok, I32(N)))
        check("cross_entropy_sum", abs(out.get()[0] - loss_ok.get().astype(np.float64).sum()) < 1e-9)


# ---- adamw.cu ------------------------------------------------------------------------------------------------

def test_adamw():
    m = "adamw"
    n = 100003
    p, g, m0, v0 = randn(n), randn(n), randn(n, scale=0.1), np.abs(randn(n, scale=0.1))
    lr, b1, b2, eps, wd, step, scale = 1e-3, 0.9, 0.95, 1e-8, 0.1, 7, 0.375
    step_size = lr / (1 - b1 ** step)
    bc2 = math.sqrt(1 - b2 ** step)
    gs = (g * np.float32(scale)).astype(np.float64)  # the clipped gradient, rounded to fp32 as the kernel does
    mm = b1 * m0.astype(np.float64) + (1 - b1) * gs
    vv = b2 * v0.astype(np.float64) + (1 - b2) * gs ** 2
    want = p * (1 - lr * wd) - step_size * mm / (np.sqrt(vv) / bc2 + eps)
    for name in ["adamw_f32", "adamw_f32_x4", "adamw_f32_bf16copy"]:
        P, G, M, Vv = cp.asarray(p), cp.asarray(g), cp.asarray(m0), cp.asarray(v0)
        args = (P, G, M, Vv, I64(n), F32(lr), F32(b1), F32(b2), F32(eps), F32(wd), F32(step_size), np.float64(bc2),
                F32(scale))
        copy = cp.zeros(n, cp.uint16)
        launch(m, name, (cdiv(n, 256),), (256,), args + ((copy,) if "copy" in name else ()))
        check(f"{name} param", *close(P.get(), want, 1e-6))
        check(f"{name} update", *close(P.get() - p, want - p, 1e-4))
        check(f"{name} moments", close(M.get(), mm, 1e-6)[0] and close(Vv.get(), vv, 1e-6)[0])
        if "copy" in name:
            check(f"{name} bf16 copy", np.array_equal(copy.get(), to_bf16(P.get())))


# ---- bias.cu -------------------------------------------------------------------------------------------------

def test_bias():
    m = "bias"
    N, O = 333, 777
    y, bias, dy = randn(N, O), randn(O), randn(N, O)
    for dt, tol in [("f32", 0), ("bf16", 0)]:
        enc = (lambda a: cp.asarray(a)) if dt == "f32" else (lambda a: cp.asarray(to_bf16(a)))
        dec = (lambda a: a.get()) if dt == "f32" else (lambda a: from_bf16(a.get()))
        Y = enc(y)
        launch(m, f"bias_add_{dt}", (N,), (256,), (Y, enc(bias), I32(N), I32(O)))
        want = (y + bias).astype(np.float32) if dt == "f32" else rnd(rnd(y) + rnd(bias))
        check(f"bias_add_{dt} exact", np.array_equal(dec(Y), want))
        rows = 64
        R = cdiv(N, rows)
        parts = cp.zeros((R, O), cp.float32)
        launch(m, f"bias_grad_partial_{dt}", (cdiv(O, 256), R), (256,), (parts, enc(dy), I32(N), I32(O), I32(rows)))
        d0 = randn(O)
        D = cp.asarray(d0)
        launch(m, "bias_grad_finish", (cdiv(O, 256),), (256,), (D, parts, I32(R), I32(O), I32(1)))
        ref = (dy if dt == "f32" else rnd(dy)).astype(np.float64).sum(0)
        check(f"bias_grad_{dt}", *close(D.get() - d0, ref, 1e-5))


# ---- attention.cu --------------------------------------------------------------------------------------------

def att_smem(kind, HS):
    LD = HS + 1
    return {"forward": 4 * (192 * LD + 4160), "dq": 4 * (256 * LD + 4160), "dkdv": 4 * (256 * LD + 8448)}[kind]


def doc_starts(B, T, seed):
    """Packed sequences' document starts (B*T int32): random documents of 1 to 70 tokens (a quarter of one token)."""
    r = np.random.default_rng(seed)
    starts = np.zeros((B, T), np.int32)
    for b in range(B):
        begin = 0
        while begin < T:
            length = 1 if r.integers(4) == 0 else int(r.integers(1, 71))
            starts[b, begin:begin + length] = begin
            begin += length
    return starts.reshape(B * T)


def null_or(a):
    """A kernel's pointer argument: the device array, or a null pointer for None."""
    return np.uint64(0) if a is None else a


def attention_reference(qkv, dout, B, T, NH, NKV, HS, W, starts=None):
    """float64 torch reference on the GPU: out, lse, dqkv; starts: document starts (B*T) or None."""
    X = torch.tensor(qkv, dtype=torch.float64, device="cuda", requires_grad=True)
    x = X.view(B, T, NH + 2 * NKV, HS)
    q = x[:, :, :NH].transpose(1, 2)
    k = x[:, :, NH:NH + NKV].transpose(1, 2).repeat_interleave(NH // NKV, dim=1)
    v = x[:, :, NH + NKV:].transpose(1, 2).repeat_interleave(NH // NKV, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(HS)
    qi = torch.arange(T, device="cuda")[:, None]
    ki = torch.arange(T, device="cuda")[None, :]
    allowed = (ki <= qi) & ((ki > qi - W) if W > 0 else True)
    if starts is not None:  # (B, 1, T, T): key k at or after the query's document start
        first = torch.tensor(starts.reshape(B, T), device="cuda")[:, None, :, None]
        allowed = allowed & (ki[None, None] >= first)
    s = s.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(s, -1)
    out = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B * T, NH * HS)
    out.backward(torch.tensor(dout, dtype=torch.float64, device="cuda"))
    return out.detach().cpu().numpy(), lse.detach().cpu().numpy(), X.grad.cpu().numpy()


def run_attention(dt, qkv_dev, out, lse, dout_dev, dqkv, B, T, NH, NKV, HS, W, backward=True, starts=None):
    m = "attention"
    scale = F32(1 / math.sqrt(HS))
    shape = (null_or(starts), I32(B), I32(T), I32(NH), I32(NKV), I32(HS), I32(W), scale)
    launch(m, f"attention_forward_{dt}", (cdiv(T, 64), NH, B), (256,), (out, lse, qkv_dev) + shape,
           att_smem("forward", HS))
    if not backward:
        return
    delta = cp.zeros((B, NH, T), cp.float32)
    launch(m, f"attention_backward_delta_{dt}", (cdiv(B * T * NH, 8),), (256,),
           (delta, dout_dev, out, I32(B), I32(T), I32(NH), I32(HS)))
    launch(m, f"attention_backward_dq_{dt}", (cdiv(T, 64), NH, B), (256,),
           (dqkv, dout_dev, qkv_dev, lse, delta) + shape, att_smem("dq", HS))
    launch(m, f"attention_backward_dkdv_{dt}", (cdiv(T, 64), NKV, B), (256,),
           (dqkv, dout_dev, qkv_dev, lse, delta) + shape, att_smem("dkdv", HS))


def tc_smem(kind, HS):
    return {"forward": 768 * (HS + 8), "dq": 768 * (HS + 8), "dkdv": 768 * (HS + 8) + 1024}[kind]


def run_attention_tc(qkv_dev, out, lse, dout_dev, dqkv, B, T, NH, NKV, HS, W, backward=True, starts=None):
    m = "attention_tc"
    scale = F32(1 / math.sqrt(HS))
    shape = (null_or(starts), I32(B), I32(T), I32(NH), I32(NKV), I32(HS), I32(W), scale)
    launch(m, f"attention_tc_forward_hs{HS}_bf16", (cdiv(T, 128), NH, B), (128,), (out, lse, qkv_dev) + shape,
           tc_smem("forward", HS))
    if not backward:
        return
    delta = cp.zeros((B, NH, T), cp.float32)
    launch("attention", "attention_backward_delta_bf16", (cdiv(B * T * NH, 8),), (256,),
           (delta, dout_dev, out, I32(B), I32(T), I32(NH), I32(HS)))
    launch(m, "attention_tc_backward_dq_bf16", (cdiv(T, 64), NH, B), (128,),
           (dqkv, dout_dev, qkv_dev, lse, delta) + shape, tc_smem("dq", HS))
    # one split (no partial sums): dk and dv straight into dqkv
    launch(m, "attention_tc_backward_dkdv_bf16", (cdiv(T, 64), NKV, B), (128,),
           (dqkv, dout_dev, qkv_dev, lse, delta) + shape + (null_or(None), I32(1)), tc_smem("dkdv", HS))


def test_attention():
    # the last field: packed sequences (random documents) or not
    configs = [(2, 130, 4, 2, 64, 0, 0), (1, 200, 6, 2, 128, 0, 0), (2, 100, 4, 1, 80, 17, 0), (1, 64, 2, 2, 32, 0, 0),
               (4, 16, 4, 2, 8, 5, 0), (1, 300, 8, 8, 96, 64, 0), (1, 257, 4, 4, 128, 1, 0),
               (2, 300, 4, 2, 64, 0, 1), (1, 400, 4, 1, 128, 0, 1), (2, 200, 4, 2, 80, 33, 1), (3, 90, 6, 3, 8, 0, 1),
               (1, 260, 4, 4, 128, 100, 1)]
    if "--small" in sys.argv:  # for compute-sanitizer runs
        configs = [(1, 70, 2, 1, 128, 0, 0), (2, 40, 2, 2, 64, 9, 0), (1, 20, 2, 1, 8, 0, 0), (2, 150, 2, 1, 64, 0, 1),
                   (1, 100, 2, 1, 8, 7, 1)]
    for B, T, NH, NKV, HS, W, packed in configs:
        N, width = B * T, (NH + 2 * NKV) * HS
        qkv, dout = randn(N, width), randn(N, NH * HS)
        starts = doc_starts(B, T, N) if packed else None
        for dt, tol in [("f32", 3e-5), ("bf16", 2e-2), ("tc", 2e-2)]:
            if dt == "tc" and HS not in (32, 64, 80, 96, 128):
                continue
            enc = (lambda a: cp.asarray(a)) if dt == "f32" else (lambda a: cp.asarray(to_bf16(a)))
            dec = (lambda a: a.get()) if dt == "f32" else (lambda a: from_bf16(a.get()))
            sto = cp.float32 if dt == "f32" else cp.uint16
            qv, dv = (qkv, dout) if dt == "f32" else (rnd(qkv), rnd(dout))
            ref_out, ref_lse, ref_dqkv = attention_reference(qv, dv, B, T, NH, NKV, HS, W, starts)
            starts_dev = None if starts is None else cp.asarray(starts)
            outs = []
            for _ in range(2):
                out, lse = cp.zeros((N, NH * HS), sto), cp.zeros((B, NH, T), cp.float32)
                dqkv = cp.full((N, width), 7777, sto)  # every element must be written
                # dOut for the kernel: the same values the reference saw
                if dt == "tc":
                    run_attention_tc(enc(qkv), out, lse, enc(dout), dqkv, B, T, NH, NKV, HS, W, starts=starts_dev)
                else:
                    run_attention(dt, enc(qkv), out, lse, enc(dout), dqkv, B, T, NH, NKV, HS, W, starts=starts_dev)
                outs.append((dec(out), lse.get(), dec(dqkv)))
            tag = f"attention_{dt} B={B} T={T} NH={NH} NKV={NKV} HS={HS} W={W}" + (" packed" if packed else "")
            check(tag + " out", *close(outs[0][0], ref_out, tol))
            check(tag + " lse", *close(outs[0][1], ref_lse, 1e-5 if dt == "f32" else 1e-3))
            check(tag + " dqkv", *close(outs[0][2], ref_dqkv, tol * 2))
            check(tag + " deterministic", all(np.array_equal(a, b) for a, b in zip(outs[0], outs[1])))


def alibi_slopes(n):
    """BLOOM's ALiBi slopes (as io.fsdp4j.backend.AttentionShape.alibiSlope)."""
    p = 1 << (n.bit_length() - 1)
    return [2.0 ** (-8.0 * (h + 1) / p) if h < p else 2.0 ** (-8.0 * (2 * (h - p) + 1) / (2.0 * p)) for h in range(n)]


def test_attention_ext():
    """The _ext kernels: BLOOM's per-head qkv layout ([NH, 3, HS] per row) and ALiBi, against float64 torch."""
    configs = [(2, 130, 6, 64, 0), (1, 70, 4, 8, 0), (1, 200, 5, 128, 0), (2, 180, 4, 32, 1)]
    for B, T, NH, HS, packed in configs:
        N, width = B * T, 3 * NH * HS
        qkv, dout = randn(N, width), randn(N, NH * HS)
        starts = doc_starts(B, T, N) if packed else None
        for per_head, alibi in [(1, 1), (1, 0), (0, 1)]:
            for dt, tol in [("f32", 3e-5), ("bf16", 2e-2)]:
                enc = (lambda a: cp.asarray(a)) if dt == "f32" else (lambda a: cp.asarray(to_bf16(a)))
                dec = (lambda a: a.get()) if dt == "f32" else (lambda a: from_bf16(a.get()))
                sto = cp.float32 if dt == "f32" else cp.uint16
                qv, dv = (qkv, dout) if dt == "f32" else (rnd(qkv), rnd(dout))
                X = torch.tensor(qv, dtype=torch.float64, device="cuda", requires_grad=True)
                if per_head:
                    x = X.view(B, T, NH, 3, HS)
                    q, k, v = (x[:, :, :, i].transpose(1, 2) for i in range(3))
                else:
                    x = X.view(B, T, 3 * NH, HS)
                    q, k, v = (x[:, :, i * NH:(i + 1) * NH].transpose(1, 2) for i in range(3))
                s = q @ k.transpose(-1, -2) / math.sqrt(HS)
                qi = torch.arange(T, device="cuda")[:, None]
                ki = torch.arange(T, device="cuda")[None, :]
                if alibi:
                    slopes = torch.tensor(alibi_slopes(NH), dtype=torch.float64, device="cuda")[:, None, None]
                    s = s + slopes * (ki - qi).to(torch.float64)
                allowed = ki <= qi
                if starts is not None:
                    allowed = allowed & (ki[None, None] >= torch.tensor(starts.reshape(B, T), device="cuda")[:, None, :, None])
                s = s.masked_fill(~allowed, float("-inf"))
                ref_lse = torch.logsumexp(s, -1).detach().cpu().numpy()
                o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(N, NH * HS)
                o.backward(torch.tensor(dv, dtype=torch.float64, device="cuda"))
                ref_out, ref_dqkv = o.detach().cpu().numpy(), X.grad.cpu().numpy()
                out, lse = cp.zeros((N, NH * HS), sto), cp.zeros((B, NH, T), cp.float32)
                dqkv = cp.full((N, width), 7777, sto)  # every element must be written
                shape = (null_or(None if starts is None else cp.asarray(starts)), I32(B), I32(T), I32(NH), I32(NH),
                         I32(HS), I32(0), F32(1 / math.sqrt(HS)), I32(per_head), I32(alibi), F32(0))  # no soft cap
                qd, dd = enc(qkv), enc(dout)
                launch("attention", f"attention_forward_ext_{dt}", (cdiv(T, 64), NH, B), (256,), (out, lse, qd) + shape,
                       att_smem("forward", HS))
                delta = cp.zeros((B, NH, T), cp.float32)
                launch("attention", f"attention_backward_delta_{dt}", (cdiv(B * T * NH, 8),), (256,),
                       (delta, dd, out, I32(B), I32(T), I32(NH), I32(HS)))
                launch("attention", f"attention_backward_dq_ext_{dt}", (cdiv(T, 64), NH, B), (256,),
                       (dqkv, dd, qd, lse, delta) + shape, att_smem("dq", HS))
                launch("attention", f"attention_backward_dkdv_ext_{dt}", (cdiv(T, 64), NH, B), (256,),
                       (dqkv, dd, qd, lse, delta) + shape, att_smem("dkdv", HS))
                tag = (f"attention_ext_{dt} B={B} T={T} NH={NH} HS={HS} perHead={per_head} alibi={alibi}"
                       + (" packed" if packed else ""))
                check(tag + " out", *close(dec(out), ref_out, tol))
                check(tag + " lse", *close(lse.get(), ref_lse, 1e-5 if dt == "f32" else 1e-3))
                check(tag + " dqkv", *close(dec(dqkv), ref_dqkv, tol * 2))


# ---- timings -------------------------------------------------------------------------------------------------

def bench(label, f, reps=5):
    f()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(reps):
        f()
    end.record()
    end.synchronize()
    ms = cp.cuda.get_elapsed_time(start, end) / reps
    print(f"time {label}: {ms:.3f} ms", flush=True)
    return ms


def benchmarks():
    B, T, NH, NKV, HS = 1, 2048, 32, 8, 128
    N, width = B * T, (NH + 2 * NKV) * HS
    for dt in ["f32", "bf16"]:
        sto = cp.float32 if dt == "f32" else cp.uint16
        qkv = cp.asarray(randn(N, width)) if dt == "f32" else cp.asarray(to_bf16(randn(N, width)))
        out, lse = cp.zeros((N, NH * HS), sto), cp.zeros((B, NH, T), cp.float32)
        dout = cp.asarray(randn(N, NH * HS)) if dt == "f32" else cp.asarray(to_bf16(randn(N, NH * HS)))
        dqkv = cp.zeros((N, width), sto)
        flops = 4 * B * NH * HS * T * T / 2
        ms = bench(f"attention_forward_{dt} 7B shape (T=2048 NH=32 NKV=8 HS=128)",
                   lambda: run_attention(dt, qkv, out, lse, dout, dqkv, B, T, NH, NKV, HS, 0, backward=False))
        print(f"     {flops / ms / 1e9:.1f} TFLOP/s (causal)")
        msb = bench(f"attention_forward+backward_{dt} 7B shape",
                    lambda: run_attention(dt, qkv, out, lse, dout, dqkv, B, T, NH, NKV, HS, 0))
        print(f"     backward alone ~ {msb - ms:.3f} ms")
    qkv = cp.asarray(to_bf16(randn(N, width)))
    out, lse = cp.zeros((N, NH * HS), cp.uint16), cp.zeros((B, NH, T), cp.float32)
    dout = cp.asarray(to_bf16(randn(N, NH * HS)))
    dqkv = cp.zeros((N, width), cp.uint16)
    flops = 4 * B * NH * HS * T * T / 2
    ms = bench("attention_tc_forward_hs128_bf16 7B shape",
               lambda: run_attention_tc(qkv, out, lse, dout, dqkv, B, T, NH, NKV, HS, 0, backward=False), reps=20)
    print(f"     {flops / ms / 1e9:.1f} TFLOP/s (causal)")
    msb = bench("attention_tc_forward+backward_bf16 7B shape",
                lambda: run_attention_tc(qkv, out, lse, dout, dqkv, B, T, NH, NKV, HS, 0), reps=20)
    print(f"     backward alone ~ {msb - ms:.3f} ms, {2.5 * flops / (msb - ms) / 1e9:.1f} TFLOP/s")
    starts = cp.asarray((np.arange(T) // 256 * 256).astype(np.int32))  # packed: 8 documents of 256 tokens
    msp = bench("attention_tc_forward+backward_bf16 7B shape, packed (8 documents of 256)",
                lambda: run_attention_tc(qkv, out, lse, dout, dqkv, B, T, NH, NKV, HS, 0, starts=starts), reps=20)
    print(f"     {msb / msp:.2f}x faster than one document (8x fewer scores)")
    N, V = 2048, 152064
    for dt in ["f32", "bf16"]:
        z = cp.asarray(randn(N, V)) if dt == "f32" else cp.asarray(to_bf16(randn(N, V)))
        t = cp.asarray(rng.integers(0, V, N).astype(np.int32))
        loss = cp.zeros(N, cp.float32)
        ms = bench(f"cross_entropy_{dt} N=2048 V=152064",
                   lambda: fn("cross_entropy", f"cross_entropy_{dt}")((N,), (1024,),
                                                                       (z, loss, t, I32(N), I32(V), F32(1e-3))))
        print(f"     {z.nbytes * 3 / ms / 1e6:.0f} GB/s (2 reads + 1 write)")
    N, C = 2048, 4096
    x = cp.asarray(to_bf16(randn(N, C)))
    w = cp.asarray(to_bf16(randn(C)))
    o, r = cp.zeros((N, C), cp.uint16), cp.zeros(N, cp.float32)
    bench("rmsnorm_forward_bf16 N=2048 C=4096", lambda: fn("rmsnorm", "rmsnorm_forward_bf16")(
        (N,), (256,), (o, r, x, w, I32(N), I32(C), F32(1e-5))))
    ids = cp.asarray(rng.integers(0, 152064, 8192).astype(np.int32))
    dtab = cp.zeros((152064, C), cp.float32)
    dO = cp.asarray(to_bf16(randn(8192, C)))
    bench("embedding_backward_bf16 N=8192 C=4096 V=152064", lambda: fn("embedding", "embedding_backward_bf16")(
        (8192,), (256,), (dtab, ids, dO, I32(8192), I32(C), I32(152064))))


if __name__ == "__main__":
    print("device:", cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    for t in [test_elementwise, test_embedding, test_rmsnorm, test_rope, test_swiglu, test_cross_entropy,
              test_adamw, test_bias, test_attention, test_attention_ext]:
        if only not in t.__name__:
            continue
        try:
            t()
        except Exception as e:  # report and go on
            import traceback
            traceback.print_exc()
            check(t.__name__, False, repr(e))
    if "--bench" in sys.argv:
        benchmarks()
    print(f"{len(failures)} failure(s)" + (": " + ", ".join(failures) if failures else ""))
    sys.exit(1 if failures else 0)
