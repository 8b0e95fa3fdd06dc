"""Stepwise 16-bit candidates for CUDA eager's backward kernels."""
import json, sys, torch, torch.nn.functional as F
dev = "cuda"; N = 1 << 16
def sample(dtype, seed, scale=4.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(N, generator=g, dtype=torch.float64) * scale).to(dtype).to(dev)
def neq(a, b): return int(((a != b) & ~(a.isnan() & b.isnan())).sum())
fma = lambda a, b, c: torch.addcmul(c, a, b)
rows = []
for dt in (torch.float16, torch.bfloat16, torch.float32):
    x = sample(dt, 5); gg = sample(dt, 6); t = sample(dt, 7)
    f = lambda v: v.float()
    r = lambda v: v.to(dt)
    y = torch.tanh(x)
    e = torch.ops.aten.tanh_backward(gg, y)
    rows.append(("tanh_bwd", dt, {"stepwise": neq(r(f(gg) * f(r(1 - f(r(f(y) * f(y)))))), e),
                                  "fp32_fma": neq(r(f(gg) * fma(-f(y), f(y), torch.ones_like(f(y)))), e)}))
    y = torch.sigmoid(x)
    e = torch.ops.aten.sigmoid_backward(gg, y)
    rows.append(("sigmoid_bwd", dt, {"stepwise": neq(r(f(r(f(gg) * f(r(1 - f(y))))) * f(y)), e),
                                     "fp32": neq(r((f(gg) * (1 - f(y))) * f(y)), e)}))
    # smooth_l1 / huber forward (reduction none): stepwise in scalar_t
    z = r((f(x) - f(t)).abs())
    e = F.smooth_l1_loss(x, t, reduction="none")
    rows.append(("smooth_l1_fwd", dt, {"stepwise": neq(torch.where(f(z) < 1, f(r(f(r(f(r(0.5 * f(z))) * f(z))) / 1.0)), f(r(f(z) - 0.5))).to(dt), e),
                                       "fp32": neq(torch.where(f(z) < 1, 0.5 * f(z) * f(z), f(z) - 0.5).to(dt), e)}))
    e = F.huber_loss(x, t, reduction="none", delta=0.7)
    d = 0.7
    rows.append(("huber_fwd", dt, {"stepwise": neq(torch.where(f(z) < d, f(r(f(r(0.5 * f(z))) * f(z))), f(r(d * f(r(f(z) - f(r(torch.tensor(0.5 * d))).cuda()))))).to(dt), e),
                                   "fp32": neq(torch.where(f(z) < d, 0.5 * f(z) * f(z), d * (f(z) - 0.5 * d)).to(dt), e)}))
    # softmax backward over rows of 256
    xs = x.view(256, 256); gs = gg.view(256, 256)
    o = torch.softmax(xs, -1)
    e = torch.ops.aten._softmax_backward_data(gs, o, -1, dt)
    go = f(gs) * f(o); s = go.sum(-1, keepdim=True)
    rows.append(("softmax_bwd", dt, {"decomp": neq(r(go - f(o) * s), e), "fma": neq(r(fma(-f(o), s.expand_as(go), go)), e),
                                     "o*(g-s)": neq(r(f(o) * (f(gs) - s)), e)}))
    lo = torch.log_softmax(xs, -1)
    e = torch.ops.aten._log_softmax_backward_data(gs, lo, -1, dt)
    s = f(gs).sum(-1, keepdim=True)
    rows.append(("log_softmax_bwd", dt, {"decomp": neq(r(f(gs) - torch.exp(f(lo)) * s), e),
                                         "fma": neq(r(fma(-torch.exp(f(lo)), s.expand_as(xs).float(), f(gs))), e)}))
for name, dt, d in rows:
    print(json.dumps({"op": name, "dtype": str(dt).split(".")[1], **d}), flush=True)
json.dump([{"op": n, "dtype": str(dt), **d} for n, dt, d in rows], open(sys.argv[1], "w"))
