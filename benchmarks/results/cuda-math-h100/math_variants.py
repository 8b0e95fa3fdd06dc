"""Which Triton expression and compile flags give CUDA eager's fp32 math bit for bit."""
import json, sys, os, importlib.util, itertools, torch, triton
dev = "cuda"
N = 1 << 20
g = torch.Generator().manual_seed(1)
q = N // 4
mag = torch.pow(10.0, torch.rand(q, generator=g, dtype=torch.float64) * 78 - 40) * torch.sign(torch.randn(q, generator=g, dtype=torch.float64))
X = torch.cat([torch.randn(q, generator=g, dtype=torch.float64) * 4, torch.rand(q, generator=g, dtype=torch.float64) * 2 - 1,
               mag, torch.randn(q, generator=g, dtype=torch.float64) * 0.01]).float().to(dev)
Y = X[torch.randperm(N, generator=g).to(dev)].clone()
Z = X[torch.randperm(N, generator=g).to(dev)].clone()
sub = (X.abs() < 1.1754944e-38) & (X != 0)
FUN = {  # name: (torch reference, [triton expressions])
 "exp": (torch.exp, ["tl.exp(x)", "libdevice.exp(x)"]),
 "exp2": (torch.exp2, ["tl.exp2(x)", "libdevice.exp2(x)"]),
 "expm1": (torch.expm1, ["libdevice.expm1(x)"]),
 "log": (torch.log, ["tl.log(x)", "libdevice.log(x)"]),
 "log2": (torch.log2, ["tl.log2(x)", "libdevice.log2(x)"]),
 "log10": (torch.log10, ["libdevice.log10(x)"]),
 "log1p": (torch.log1p, ["libdevice.log1p(x)"]),
 "sqrt": (torch.sqrt, ["tl.sqrt(x)", "tl.sqrt_rn(x)", "libdevice.sqrt(x)", "libdevice.sqrt_rn(x)"]),
 "rsqrt": (torch.rsqrt, ["tl.rsqrt(x)", "libdevice.rsqrt(x)", "1.0 / libdevice.sqrt_rn(x)"]),
 "sin": (torch.sin, ["tl.sin(x)", "libdevice.sin(x)"]),
 "cos": (torch.cos, ["tl.cos(x)", "libdevice.cos(x)"]),
 "tan": (torch.tan, ["libdevice.tan(x)"]),
 "asin": (torch.asin, ["libdevice.asin(x)"]),
 "acos": (torch.acos, ["libdevice.acos(x)"]),
 "atan": (torch.atan, ["libdevice.atan(x)"]),
 "sinh": (torch.sinh, ["libdevice.sinh(x)"]),
 "cosh": (torch.cosh, ["libdevice.cosh(x)"]),
 "tanh": (torch.tanh, ["libdevice.tanh(x)"]),
 "asinh": (torch.asinh, ["libdevice.asinh(x)"]),
 "acosh": (torch.acosh, ["libdevice.acosh(x)"]),
 "atanh": (torch.atanh, ["libdevice.atanh(x)"]),
 "erf": (torch.erf, ["libdevice.erf(x)"]),
 "erfc": (torch.erfc, ["libdevice.erfc(x)"]),
 "erfinv": (torch.erfinv, ["libdevice.erfinv(x)"]),
 "lgamma": (torch.lgamma, ["libdevice.lgamma(x)"]),
 "sigmoid": (torch.sigmoid, ["1.0 / (1.0 + tl.exp(-x))", "1.0 / (1.0 + libdevice.exp(-x))", "libdevice.div_rn(1.0, 1.0 + libdevice.exp(-x))"]),
 "atan2": (lambda x, y: torch.atan2(x, y), ["libdevice.atan2(x, y)"]),
 "hypot": (lambda x, y: torch.hypot(x, y), ["libdevice.hypot(x, y)"]),
 "pow": (lambda x, y: torch.pow(x.abs(), y), ["libdevice.pow(tl.abs(x), y)"]),
 "div": (lambda x, y: x / y, ["x / y", "libdevice.div_rn(x, y)"]),
 "mul_add_separate": (lambda x, y, z: x * y + z, ["x * y + z", "libdevice.mul_rn(x, y) + z"]),
}
src = ["import triton", "import triton.language as tl", "from triton.language.extra import libdevice", ""]
kern = []
for name, (ref, exprs) in FUN.items():
    for j, e in enumerate(exprs):
        k = f"k_{name}_{j}"
        src += ["@triton.jit", f"def {k}(X, Y, Z, O, n, BLOCK: tl.constexpr):",
                "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)", "    m = offs < n",
                "    x = tl.load(X + offs, mask=m)", "    y = tl.load(Y + offs, mask=m)", "    z = tl.load(Z + offs, mask=m)",
                f"    tl.store(O + offs, {e}, mask=m)", ""]
        kern.append((name, e, k))
path = "/tmp/mv_kernels.py"
open(path, "w").write("\n".join(src))
spec = importlib.util.spec_from_file_location("mv_kernels", path); mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
def neq(a, b, mask=None):
    d = (a != b) & ~(a.isnan() & b.isnan())
    if mask is not None: d = d & mask
    return int(d.sum())
rows = []
has_ftz = True
for name, e, k in kern:
    ref = FUN[name][0]
    nargs = ref.__code__.co_argcount if hasattr(ref, "__code__") else 1
    want = ref(*(X, Y, Z)[:nargs])
    for fusion, ftz in itertools.product((True, False), (True, False)):
        out = torch.empty_like(X)
        kw = dict(enable_fp_fusion=fusion)
        if has_ftz: kw["enable_reflect_ftz"] = ftz
        try:
            getattr(mod, k)[(N // 1024,)](X, Y, Z, out, N, BLOCK=1024, **kw)
            torch.cuda.synchronize()
            r = {"fn": name, "expr": e, "fusion": fusion, "ftz": ftz, "diff": neq(out, want), "diff_subnormal_in": neq(out, want, sub)}
        except Exception as ex:
            if "enable_reflect_ftz" in repr(ex) and has_ftz:
                has_ftz = False
            r = {"fn": name, "expr": e, "fusion": fusion, "ftz": ftz, "error": repr(ex)[:200]}
        rows.append(r); print(json.dumps(r), flush=True)
json.dump(rows, open(sys.argv[1], "w"))
