"""Host microseconds per call of the library calls a compiled T5 step makes, with the GPU asleep
(launches queue without waiting), against the counts of one step."""
import json, statistics, sys, time
import torch
from torch._C._dynamo.guards import _empty_strided_cuda, _reinterpret_tensor

dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = True

def per_call(fn, n=300, reps=9):
    res = []
    for _ in range(reps):
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)
        t = time.perf_counter()
        for _ in range(n):
            fn()
        res.append((time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return round(min(res), 2), round(statistics.median(res), 2)

h = torch.float16
A = torch.randn(4096, 512, device=dev, dtype=h); W = torch.randn(512, 512, device=dev, dtype=h)
W2 = torch.randn(512, 2048, device=dev, dtype=h); At = A.t()
D = torch.randn(1024, 512, device=dev, dtype=h); L = torch.randn(512, 32128, device=dev, dtype=h)
Q = torch.randn(64, 512, 64, device=dev); K = torch.randn(64, 64, 512, device=dev)
s = torch.randn(16, device=dev); s2 = torch.randn(16, device=dev)
mm = torch.ops.aten.mm.default._op
cases = {
    "torch.mm 4096x512x512": lambda: torch.mm(A, W),
    "aten.mm._op 4096x512x512": lambda: mm(A, W),
    "torch.mm 4096x512x2048": lambda: torch.mm(A, W2),
    "torch.mm dW 512x4096x512": lambda: torch.mm(At, A),
    "torch.mm 1024x512x512": lambda: torch.mm(D, W),
    "torch.bmm fp32 64x512x64x512": lambda: torch.bmm(Q, K),
    "_empty_strided_cuda 4096x512": lambda: _empty_strided_cuda((4096, 512), (512, 1), h),
    "_reinterpret_tensor": lambda: _reinterpret_tensor(A, (8, 512, 512), (262144, 512, 1), 0),
    "torch.add 16 (alloc+launch)": lambda: torch.add(s, s2),
    "add_ 16 (launch)": lambda: s.add_(s2),
    "python call of a no-op": lambda: None,
}
out = {}
for name, fn in cases.items():
    fn()
    out[name] = per_call(fn)
    print(f"{name:34s} min {out[name][0]:7.2f} us  median {out[name][1]:7.2f} us", flush=True)
# one T5 step's counts (8x512x128, fp16; cProfile of the compiled step): matrix products, batched
# products, allocations, views, generated launches, other ATen calls
counts = {"mm": 186, "bmm": 72, "alloc": 755, "view": 869, "launch": 323, "other": 59}
cost = {"mm": out["torch.mm 4096x512x512"][0], "bmm": out["torch.bmm fp32 64x512x64x512"][0],
        "alloc": out["_empty_strided_cuda 4096x512"][0], "view": out["_reinterpret_tensor"][0],
        "launch": out["add_ 16 (launch)"][0], "other": out["torch.add 16 (alloc+launch)"][0]}
floor = sum(counts[k] * cost[k] for k in counts) / 1000
print("T5 step floor of library calls alone, ms:", round(floor, 2), {k: round(counts[k] * cost[k] / 1000, 2) for k in counts})
json.dump({"per_call_us": out, "t5_counts": counts, "t5_floor_ms": floor}, open(sys.argv[1], "w"), indent=1)
