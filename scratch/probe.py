"""Semantics probe: CUDA eager against candidate formulas (computed on CPU in fp32 step by step)."""
import json, os, sys
import torch
import triton
import triton.language as tl

out = {}
dev = "cuda"
g = torch.Generator().manual_seed(0)
F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
IV = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def nbits(a, b):
    a, b = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
    return int((a.view(IV[a.element_size()]) != b.view(IV[b.element_size()])).sum())


def R(x, dt):  # round an fp32 tensor to dt and back
    return x.to(dt).to(F32)


N = 200000
for dt in (F16, BF16, F32):
    a = (torch.randn(N, generator=g) * 50).to(dt)
    b = (torch.randn(N, generator=g) * 3).to(dt)
    b = torch.where(b == 0, torch.ones((), dtype=dt), b)
    a32, b32 = a.float(), b.float()
    ad, bd = a.to(dev), b.to(dev)
    key = str(dt)[6:]
    r = {}
    e = torch.div(ad, bd, rounding_mode="trunc").cpu()
    r["trunc_tt fp32"] = nbits(e, torch.trunc(a32 / b32).to(dt))
    r["trunc_tt rounded_q"] = nbits(e, torch.trunc(R(a32 / b32, dt)).to(dt))

    def floor_f(a, b, rq=lambda x: x, rf=lambda x: x, rall=lambda x: x):
        mod = torch.fmod(a, b)
        div = rall((a - rall(mod)) / b)
        div = torch.where((mod != 0) & ((b < 0) != (mod < 0)), rall(div - 1), div)
        fl = rf(torch.floor(div))
        fl = torch.where(rall(div - fl) > 0.5, rf(fl + 1), fl)
        basic = rq(a / b)
        fl = torch.where(div == 0, torch.copysign(torch.zeros_like(a), basic), fl)
        return torch.where(b == 0, basic, fl)
    e = torch.div(ad, bd, rounding_mode="floor").cpu()
    r["floor_tt fp32"] = nbits(e, floor_f(a32, b32).to(dt))
    r["floor_tt half_floor"] = nbits(e, floor_f(a32, b32, rq=lambda x: R(x, dt), rf=lambda x: R(x, dt)).to(dt))
    r["floor_tt all_rounded"] = nbits(e, floor_f(a32, b32, rq=lambda x: R(x, dt), rf=lambda x: R(x, dt),
                                                 rall=lambda x: R(x, dt)).to(dt))
    for s in (0.7, -2.3, 3.0, 0.1, 49.0, 1e-3):
        s32 = torch.tensor(s, dtype=F32)
        inv = 1.0 / s32
        e = torch.div(ad, s, rounding_mode="trunc").cpu()
        r[f"trunc_s{s} div"] = nbits(e, torch.trunc(a32 / s32).to(dt))
        r[f"trunc_s{s} inv"] = nbits(e, torch.trunc(a32 * inv).to(dt))
        e = torch.div(ad, s, rounding_mode="floor").cpu()
        r[f"floor_s{s} div"] = nbits(e, floor_f(a32, s32.expand_as(a32)).to(dt))

        def floor_inv(a, rf=lambda x: x):
            mod = torch.fmod(a, s32)
            div = (a - mod) * inv
            div = torch.where((mod != 0) & ((s32 < 0) != (mod < 0)), div - 1, div)
            fl = rf(torch.floor(div))
            fl = torch.where(div - fl > 0.5, rf(fl + 1), fl)
            return torch.where(div == 0, torch.copysign(torch.zeros_like(a), a * inv), fl)
        r[f"floor_s{s} inv"] = nbits(e, floor_inv(a32).to(dt))
        r[f"floor_s{s} inv_halffloor"] = nbits(e, floor_inv(a32, lambda x: R(x, dt)).to(dt))
        sd = R(s32, dt)
        for name, fn, ref in (("fmod", torch.fmod, torch.fmod), ("remainder", torch.remainder, torch.remainder)):
            e = fn(ad, s).cpu()
            r[f"{name}_s{s} fp32"] = nbits(e, ref(a32, s32).to(dt))
            r[f"{name}_s{s} rounded"] = nbits(e, ref(a32, sd).to(dt))
        e = (ad + s).cpu()
        r[f"add_s{s} fp32"] = nbits(e, (a32 + s32).to(dt))
        r[f"add_s{s} rounded"] = nbits(e, (a32 + sd).to(dt))
        e = (s - ad).cpu()
        r[f"rsub_s{s} fp32"] = nbits(e, (s32 - a32).to(dt))
        e = torch.add(ad, bd, alpha=s).cpu()
        fma = (a32.double() + b32.double() * s32.double()).float()
        r[f"addalpha_{s} mul_add"] = nbits(e, (a32 + b32 * s32).to(dt))
        r[f"addalpha_{s} fma"] = nbits(e, fma.to(dt))
        e = torch.sub(ad, bd, alpha=s).cpu()
        fma = (a32.double() - b32.double() * s32.double()).float()
        r[f"subalpha_{s} mul_sub"] = nbits(e, (a32 - b32 * s32).to(dt))
        r[f"subalpha_{s} fma"] = nbits(e, fma.to(dt))
        e = torch.add(ad, 2.5, alpha=s).cpu()
        r[f"addscalaralpha_{s} fp32"] = nbits(e, (a32 + 2.5 * s32).to(dt))
        r[f"addscalaralpha_{s} fma64"] = nbits(e, (a32.double() + 2.5 * s32.double()).float().to(dt))
    for p in (2.7, 1.3, -0.7):
        x = a.abs() / 10 + 0.5
        e = (x.to(dev) ** p).cpu()
        p32 = torch.tensor(p, dtype=F32)
        r[f"pow_{p} fp32 (cpu pow)"] = nbits(e, torch.pow(x.float(), p32).to(dt))
        r[f"pow_{p} rounded (cpu pow)"] = nbits(e, torch.pow(x.float(), R(p32, dt)).to(dt))
        r[f"pow_{p} fp32 (cuda pow fp32)"] = nbits(e, torch.pow(x.float().to(dev), p).to(dt).cpu())
        r[f"pow_{p} rounded (cuda pow fp32)"] = nbits(e, torch.pow(x.float().to(dev), R(p32, dt).item()).to(dt).cpu())
    out[key] = r

# NaN signs
nan = {}
for dt, it in ((F32, torch.int32), (F16, torch.int16), (BF16, torch.int16), (F64, torch.int64)):
    pats = {F32: [0x7FC00000, -0x00400000, 0x7F800001, -0x007FFFFF, 0x7FC12345],
            F16: [0x7E00, -0x0200, 0x7C01, -0x03FF, 0x7E15],
            BF16: [0x7FC0, -0x0040, 0x7F81, -0x007F, 0x7FC5],
            F64: [0x7FF8000000000000, -0x0008000000000000, 0x7FF0000000000001]}[dt]
    x = torch.tensor(pats, dtype=it).view(dt).repeat(40)
    xd = x.to(dev)
    show = lambda t: [hex(v & ((1 << (8 * t.element_size())) - 1)) for v in t.cpu().contiguous().view(IV[t.element_size()])[:len(pats)].tolist()]
    nan[str(dt)[6:]] = {"in": show(x), "neg": show(-xd), "mul-1": show(xd * -1), "abs": show(xd.abs()),
                        "to_f32": show(xd.float()), "to_f16": show(xd.half()), "to_bf16": show(xd.bfloat16()),
                        "copysign-1": show(torch.copysign(xd, -1.0)), "add0": show(xd + 0), "where": show(torch.where(xd == xd, 0, xd)),
                        "cpu_neg": show(-x), "cpu_to_f16": show(x.half()), "cpu_to_bf16": show(x.bfloat16())}
out["nan"] = nan


@triton.jit
def k(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(x_ptr + i, mask=m, other=0)
    tl.store(o_ptr + i, -x, mask=m)
    tl.store(o_ptr + BLOCK + i, x * -1.0, mask=m)
    tl.store(o_ptr + 2 * BLOCK + i, (x.to(tl.int32, bitcast=True) ^ -2147483648).to(tl.float32, bitcast=True), mask=m)
    z = -tl.full([], 0.0, tl.float32)
    tl.store(o_ptr + 3 * BLOCK + i, tl.where(x == x, z, x), mask=m)
    nz = tl.full([], -2147483648, tl.int32).to(tl.float32, bitcast=True)
    tl.store(o_ptr + 4 * BLOCK + i, tl.where(x == x, nz, x), mask=m)
    tl.store(o_ptr + 5 * BLOCK + i, 0.0 - x, mask=m)


@triton.jit
def k16(x_ptr, o_ptr, o2_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(x_ptr + i, mask=m, other=0)
    tl.store(o_ptr + i, x.to(tl.float16), mask=m)
    tl.store(o2_ptr + i, x.to(tl.bfloat16), mask=m)


xs = torch.tensor([0x7FC00000, -0x00400000, 0x7FC12345, -0x0012345, 0, -2147483648, 0x3F800000], dtype=torch.int32).view(F32)
o = torch.empty(6 * 8, device=dev)
k[(1,)](xs.to(dev), o, xs.numel(), BLOCK=8)
o = o.view(6, 8)[:, :7]
out["triton_f32"] = {name: [hex(v & 0xFFFFFFFF) for v in o[j].cpu().view(torch.int32).tolist()]
                     for j, name in enumerate(["-x", "x*-1", "xor", "neg_full_zero", "bitcast_negzero", "0-x"])}
o1 = torch.empty(8, device=dev, dtype=F16)
o2 = torch.empty(8, device=dev, dtype=BF16)
k16[(1,)](xs.to(dev), o1, o2, xs.numel(), BLOCK=8)
out["triton_cvt"] = {"to_f16": [hex(v & 0xFFFF) for v in o1[:7].cpu().view(torch.int16).tolist()],
                     "to_bf16": [hex(v & 0xFFFF) for v in o2[:7].cpu().view(torch.int16).tolist()]}
c = torch.tensor([True, False, True], device=dev)
out["where_negzero"] = torch.where(c, -0.0, 0.0).signbit().tolist()
path = os.path.join(os.environ.get("OUT", "."), "probe.json")
json.dump(out, open(path, "w"), indent=1)
print(json.dumps(out, indent=1))
