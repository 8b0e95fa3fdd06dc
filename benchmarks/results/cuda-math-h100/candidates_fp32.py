"""Candidate formulas for gradient/forward kernels on CUDA, with and without contraction.
fma(a,b,c) on CUDA = torch.addcmul(c, a, b) in fp32 (value 1: one fused multiply-add)."""
import json, math, sys, torch
import torch.nn.functional as F
dev = "cuda"; N = 1 << 16
def fma_c(a, b, c): return torch.addcmul(c, a, b)
def fma_n(a, b, c): return a * b + c
def T(v, like): return torch.full_like(like, v)
def sample(kind, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, generator=g, dtype=torch.float64)
    if kind == "wide": x = x * 4
    elif kind == "unit": x = torch.rand(N, generator=g, dtype=torch.float64) * 0.98 + 0.01
    return x.to(dtype).to(dev)
def neq(a, b):
    return int(((a != b) & ~(a.isnan() & b.isnan())).sum().item())
kBetaT = math.sqrt(2) * (2 / math.sqrt(math.pi)) * 0.5; kKappa = 0.044715
kBetaE = (2 / math.sqrt(math.pi)) * math.sqrt(0.5) * 0.5
def cands(name, fma, x, g):
    one = T(1.0, x)
    if name == "tanh_bwd":
        y = torch.tanh(x.to(x.dtype)).float(); return g * fma(-y, y, one)
    if name == "sigmoid_bwd":
        y = torch.sigmoid(x).float(); return (g * (1 - y)) * y
    if name == "silu_fwd":
        return x / (1 + torch.exp(-x))
    if name == "silu_bwd":
        s = 1 / (1 + torch.exp(-x)); return g * s * fma(x, 1 - s, one)
    if name == "gelu_tanh_fwd":
        x3 = x * x * x; inner = kBetaT * fma(T(kKappa, x), x3, x); return 0.5 * x * (1 + torch.tanh(inner))
    if name == "gelu_tanh_bwd":
        xsq = x * x; x3 = xsq * x; inner = kBetaT * fma(T(kKappa, x), x3, x); t = torch.tanh(inner)
        left = 0.5 * x; right = 1 + t; ld = 0.5 * right; td = fma(-t, t, one)
        idr = kBetaT * fma(T(3 * kKappa, x), xsq, one); rd = left * td * idr
        return g * (ld + rd) if fma is fma_n else g * fma(left * td, idr, ld)
    if name == "gelu_fwd":
        return x * 0.5 * (1 + torch.erf(x * math.sqrt(0.5)))
    if name == "gelu_bwd":
        cdf = 0.5 * (1 + torch.erf(x * math.sqrt(0.5))); pdf = torch.exp(-0.5 * x * x) * kBetaE
        return g * fma(x, pdf, cdf)
    if name == "mish_bwd":
        s = 1 / (1 + torch.exp(-x)); ts = torch.tanh(torch.log1p(torch.exp(x)))
        return g * fma(x * s, fma(-ts, ts, one), ts)
    raise KeyError(name)
EAGER = {
 "tanh_bwd": lambda x, g: torch.ops.aten.tanh_backward(g, torch.tanh(x)),
 "sigmoid_bwd": lambda x, g: torch.ops.aten.sigmoid_backward(g, torch.sigmoid(x)),
 "silu_fwd": lambda x, g: F.silu(x), "silu_bwd": lambda x, g: torch.ops.aten.silu_backward(g, x),
 "gelu_tanh_fwd": lambda x, g: F.gelu(x, approximate="tanh"),
 "gelu_tanh_bwd": lambda x, g: torch.ops.aten.gelu_backward(g, x, approximate="tanh"),
 "gelu_fwd": lambda x, g: F.gelu(x), "gelu_bwd": lambda x, g: torch.ops.aten.gelu_backward(g, x),
 "mish_bwd": lambda x, g: torch.ops.aten.mish_backward(g, x),
}
rows = []
for name, ref in EAGER.items():
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        x = sample("wide", dt, 5); g = sample("wide", dt, 6)
        e = ref(x, g)
        r = {"op": name, "dtype": str(dt).split(".")[1]}
        for tag, fma in (("fma", fma_c), ("nofma", fma_n)):
            if name == "tanh_bwd":
                y = torch.tanh(x).float(); c = g.float() * fma(-y, y, T(1.0, y))
            elif name == "sigmoid_bwd":
                y = torch.sigmoid(x).float(); gg = g.float(); c = (gg * (1 - y)) * y if tag == "fma" else gg * ((1 - y) * y)
            else:
                c = cands(name, fma, x.float(), g.float())
            r[tag] = neq(c.to(dt), e)
        rows.append(r); print(json.dumps(r), flush=True)
json.dump(rows, open(sys.argv[1], "w"))
