"""Bitwise sweep on CUDA: torchfuse vs eager for forward and gradients, plus candidate formulas.
usage: python sweep.py SHARD NSHARDS OUTFILE, or python sweep.py OP[,OP...] OUTFILE"""
import sys, json, math, torch, torch.nn.functional as F
import torchfuse  # noqa
torch.manual_seed(0)
N = 65536
dev = "cuda"
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16

def sample(kind, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, generator=g, dtype=torch.float64)
    if kind == "wide": x = x * 4
    elif kind == "unit": x = torch.rand(N, generator=g, dtype=torch.float64) * 0.98 + 0.01
    elif kind == "pos": x = x.abs() * 3 + 1e-3
    elif kind == "small": x = x * 0.5
    return x.to(dtype).to(dev)

def neq(a, b):
    a = a.detach(); b = b.detach()
    if a.dtype.is_floating_point:
        return int(((a != b) & ~(a.isnan() & b.isnan())).sum().item())
    return int((a != b).sum().item())

# name: (fn, [input kinds][, differentiable-input indices: all when left out])
OPS = {
 "tanh": (torch.tanh, ["wide"]), "sigmoid": (torch.sigmoid, ["wide"]), "silu": (F.silu, ["wide"]),
 "gelu": (F.gelu, ["wide"]), "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), ["wide"]),
 "mish": (F.mish, ["wide"]), "elu": (F.elu, ["wide"]), "celu": (lambda x: F.celu(x, 0.7), ["wide"]),
 "selu": (F.selu, ["wide"]), "softplus": (F.softplus, ["wide"]), "logsigmoid": (F.logsigmoid, ["wide"]),
 "hardswish": (F.hardswish, ["wide"]), "hardsigmoid": (F.hardsigmoid, ["wide"]), "softsign": (F.softsign, ["wide"]),
 "leaky_relu": (F.leaky_relu, ["wide"]), "relu": (F.relu, ["wide"]), "hardtanh": (F.hardtanh, ["wide"]),
 "softshrink": (F.softshrink, ["wide"]), "tanhshrink": (F.tanhshrink, ["wide"]),
 "threshold": (lambda x: F.threshold(x, 0.1, 20.0), ["wide"]),
 "exp": (torch.exp, ["small"]), "expm1": (torch.expm1, ["small"]), "exp2": (torch.exp2, ["small"]),
 "log": (torch.log, ["pos"]), "log1p": (torch.log1p, ["pos"]), "log2": (torch.log2, ["pos"]), "log10": (torch.log10, ["pos"]),
 "sqrt": (torch.sqrt, ["pos"]), "rsqrt": (torch.rsqrt, ["pos"]), "reciprocal": (torch.reciprocal, ["pos"]),
 "sin": (torch.sin, ["wide"]), "cos": (torch.cos, ["wide"]), "tan": (torch.tan, ["small"]),
 "asin": (torch.asin, ["unit"]), "acos": (torch.acos, ["unit"]), "atan": (torch.atan, ["wide"]),
 "sinh": (torch.sinh, ["small"]), "cosh": (torch.cosh, ["small"]), "asinh": (torch.asinh, ["wide"]),
 "atanh": (torch.atanh, ["unit"]), "erf": (torch.erf, ["wide"]), "erfc": (torch.erfc, ["wide"]),
 "erfinv": (torch.erfinv, ["unit"]), "logit": (torch.logit, ["unit"]), "logit_eps": (lambda x: torch.logit(x, 1e-3), ["unit"]),
 "square": (torch.square, ["wide"]), "pow3": (lambda x: x ** 3, ["wide"]), "pow2_5": (lambda x: x ** 2.5, ["pos"]),
 "xlogy": (torch.xlogy, ["wide", "pos"]), "xlog1py": (torch.special.xlog1py, ["wide", "pos"]),
 "entr": (torch.special.entr, ["pos"]), "sinc": (torch.sinc, ["wide"]),
 "logaddexp": (torch.logaddexp, ["wide", "wide"]), "logaddexp2": (torch.logaddexp2, ["wide", "wide"]),
 "atan2": (torch.atan2, ["wide", "wide"]), "hypot": (torch.hypot, ["wide", "wide"]),
 "div": (torch.div, ["wide", "pos"]), "pow_tt": (torch.pow, ["pos", "small"]),
 "addcmul": (lambda s, a, b: torch.addcmul(s, a, b, value=0.5), ["wide", "wide", "wide"]),
 "addcdiv": (lambda s, a, b: torch.addcdiv(s, a, b, value=0.5), ["wide", "wide", "pos"]),
 "lerp": (lambda a, b: torch.lerp(a, b, 0.3), ["wide", "wide"]),
 "lerp_t": (torch.lerp, ["wide", "wide", "unit"]),
 "mse": (lambda a, b: F.mse_loss(a, b, reduction="none"), ["wide", "wide"]),
 "l1": (lambda a, b: F.l1_loss(a, b, reduction="none"), ["wide", "wide"]),
 "smooth_l1": (lambda a, b: F.smooth_l1_loss(a, b, reduction="none"), ["wide", "wide"]),
 "huber": (lambda a, b: F.huber_loss(a, b, reduction="none", delta=0.7), ["wide", "wide"]),
 "bce": (lambda a, b: F.binary_cross_entropy(a, b, reduction="none"), ["unit", "unit"]),
 "bce_logits": (lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="none"), ["wide", "unit"]),
 "kl_div": (lambda a, b: F.kl_div(a, b, reduction="none"), ["wide", "unit"]),
 "soft_margin": (lambda a, b: F.soft_margin_loss(a, b, reduction="none"), ["wide", "wide"], (0,)),
 "poisson_nll": (lambda a, b: F.poisson_nll_loss(a, b, reduction="none"), ["small", "pos"]),
 "glu": (lambda a: F.glu(a.view(-1, 2), -1), ["wide"]),
 "frac": (torch.frac, ["wide"]), "sign": (torch.sign, ["wide"]), "abs": (torch.abs, ["wide"]),
 "clamp": (lambda x: x.clamp(-0.5, 0.7), ["wide"]),
 "nan_to_num": (torch.nan_to_num, ["wide"]),
 "rrelu_eval": (lambda x: F.rrelu(x, training=False), ["wide"]),
 "dropout_eval": (lambda x: F.dropout(x, 0.1, training=False) * 2, ["wide"]),
 "softmax": (lambda x: torch.softmax(x.view(256, 256), -1), ["wide"]),
 "log_softmax": (lambda x: torch.log_softmax(x.view(256, 256), -1), ["wide"]),
 "layer_norm": (lambda x: F.layer_norm(x.view(256, 256), (256,)), ["wide"]),
 "rms_norm": (lambda x: F.rms_norm(x.view(256, 256), (256,)), ["wide"]),
 "sum": (lambda x: x.view(256, 256).sum(-1), ["wide"]),
 "mean": (lambda x: x.view(256, 256).mean(-1), ["wide"]),
 "var": (lambda x: x.view(256, 256).var(-1), ["wide"]),
 "norm": (lambda x: x.view(256, 256).norm(dim=-1), ["wide"]),
 "cross_entropy": (lambda x: F.cross_entropy(x.view(256, 256).float(), torch.arange(256, device=dev), reduction="none"), ["wide"]),
}

def run(name, dtype):
    fn, kinds, *rest = OPS[name]
    grads = rest[0] if rest else range(len(kinds))
    ins = [sample(k, dtype, 17 * i + 3) for i, k in enumerate(kinds)]
    res = {}
    outs = {}
    for be in ("eager", "torchfuse", "aot_eager"):
        xs = [t.clone().requires_grad_(i in grads) for i, t in enumerate(ins)]
        f = fn if be == "eager" else torch.compile(lambda *a: fn(*a), backend=be, dynamic=False)
        y = f(*xs)
        g = sample("wide", y.dtype, 99)[: y.numel()].view_as(y)
        y.backward(g)
        outs[be] = [y] + [x.grad for x in xs if x.requires_grad]
    for be in ("torchfuse", "aot_eager"):
        res[be] = [neq(a, b) for a, b in zip(outs["eager"], outs[be])]
    return res

def main():
    if len(sys.argv) == 3:
        names, out = sys.argv[1].split(","), sys.argv[2]
    else:
        shard, nsh, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
        names = sorted(OPS)[shard::nsh]
    rows = []
    for name in names:
        for dt in (F32, F16, BF16):
            torch._dynamo.reset()
            try:
                r = run(name, dt)
            except Exception as e:
                r = {"error": repr(e)[:300]}
            rows.append({"op": name, "dtype": str(dt).split(".")[1], **r})
            print(json.dumps(rows[-1]), flush=True)
    json.dump(rows, open(out, "w"))

if __name__ == "__main__":
    main()
