"""Is cuDNN's fused convolution epilogue (bias, residual add, ReLU inside the convolution kernel)
worth using for frozen inference?

Two measurements, fp16, channels-last, CUDA graphs:

1. **Per convolution** (ResNet-50's shapes): ``relu(conv(x, w) + b)`` as an ATen convolution
   plus torchfuse's fused pointwise kernel, against ``aten.cudnn_convolution_relu``; and
   ``relu(conv(x, w) + b + z)`` against ``aten.cudnn_convolution_add_relu``. Each variant is
   captured as 20 calls in one CUDA graph and replayed; the time is device microseconds per
   call (events around the replays; ``smoke.graph_us``, 10 replays; runs AW and AX used a copy
   of it with 30).
2. **Whole model**: ResNet-50 written by hand with BatchNorm folded (PyTorch's
   ``fuse_conv_bn_eval``) and every conv + bias (+ shortcut) + ReLU as one cuDNN call, captured
   in one CUDA graph, against torchfuse frozen and Inductor ``reduce-overhead`` in the same
   process (median ms per call, events around each call).

Usage (on a GPU): ``PYTHONPATH=src python benchmarks/conv_epilogue.py [--batches 1,8] [--dtype fp16]
[--skip-model] [--skip-per-conv] [--out F.json]``
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from smoke import graph_us  # noqa: E402  (the shared CUDA-graph timing: 20 calls a graph)

# (input H = W, in channels, out channels, kernel, stride) of ResNet-50's convolutions
SHAPES = [
    (224, 3, 64, 7, 2),
    (56, 64, 64, 1, 1), (56, 64, 64, 3, 1), (56, 64, 256, 1, 1), (56, 256, 64, 1, 1),
    (56, 256, 128, 1, 1), (56, 128, 128, 3, 2), (28, 128, 512, 1, 1), (28, 512, 128, 1, 1), (28, 128, 128, 3, 1),
    (28, 512, 256, 1, 1), (28, 256, 256, 3, 2), (14, 256, 1024, 1, 1), (14, 1024, 256, 1, 1), (14, 256, 256, 3, 1),
    (14, 1024, 512, 1, 1), (14, 512, 512, 3, 2), (7, 512, 2048, 1, 1), (7, 2048, 512, 1, 1), (7, 512, 512, 3, 1),
]


def per_conv(batch: int, dtype: torch.dtype = torch.half) -> list[dict]:
    import torchfuse
    cl = torch.channels_last
    rows = []
    for hw, cin, cout, k, stride in SHAPES:
        x = torch.randn(batch, cin, hw, hw, device="cuda", dtype=dtype).to(memory_format=cl)
        w = (torch.randn(cout, cin, k, k, device="cuda", dtype=dtype) / (cin * k * k) ** 0.5).to(memory_format=cl)
        b = torch.randn(cout, device="cuda", dtype=dtype)
        pad = k // 2
        y0 = F.conv2d(x, w, None, stride, pad)
        z = torch.randn_like(y0)

        def ref_relu(x, w, b):
            return torch.relu(F.conv2d(x, w, None, stride, pad) + b.view(1, -1, 1, 1))

        def ref_add_relu(x, w, b, z):
            return torch.relu(F.conv2d(x, w, None, stride, pad) + b.view(1, -1, 1, 1) + z)

        # the pointwise epilogue as torchfuse fuses it without the rewrite being measured here
        tf_relu = torchfuse.compile(ref_relu, conv_epilogues=False)
        tf_add = torchfuse.compile(ref_add_relu, conv_epilogues=False)
        cud_relu = torch.ops.aten.cudnn_convolution_relu
        cud_add = torch.ops.aten.cudnn_convolution_add_relu
        with torch.no_grad():
            exact = ref_relu(x.double(), w.double(), b.double())
            exact_add = ref_add_relu(x.double(), w.double(), b.double(), z.double())
            e_tf = (tf_relu(x, w, b).double() - exact).abs().max().item()
            e_cu = (cud_relu(x, w, b, [stride] * 2, [pad] * 2, [1, 1], 1).double() - exact).abs().max().item()
            e_tfa = (tf_add(x, w, b, z).double() - exact_add).abs().max().item()
            e_cua = (cud_add(x, w, z, 1.0, b, [stride] * 2, [pad] * 2, [1, 1], 1).double() - exact_add).abs().max().item()
            row = dict(batch=batch, hw=hw, cin=cin, cout=cout, k=k, stride=stride,
                       conv_us=graph_us(lambda: F.conv2d(x, w, None, stride, pad)),
                       torchfuse_relu_us=graph_us(lambda: tf_relu(x, w, b)),
                       cudnn_relu_us=graph_us(lambda: cud_relu(x, w, b, [stride] * 2, [pad] * 2, [1, 1], 1)),
                       torchfuse_add_relu_us=graph_us(lambda: tf_add(x, w, b, z)),
                       cudnn_add_relu_us=graph_us(lambda: cud_add(x, w, z, 1.0, b, [stride] * 2, [pad] * 2, [1, 1], 1)),
                       err_torchfuse=e_tf, err_cudnn=e_cu, err_torchfuse_add=e_tfa, err_cudnn_add=e_cua)
        rows.append(row)
        row["dtype"] = str(dtype)
        print(f"{str(dtype)[6:]} b{batch} {hw:3d} {cin:4d}->{cout:4d} k{k} s{stride}: conv {row['conv_us']:6.1f}  "
              f"relu tf {row['torchfuse_relu_us']:6.1f} cudnn {row['cudnn_relu_us']:6.1f}  "
              f"add_relu tf {row['torchfuse_add_relu_us']:6.1f} cudnn {row['cudnn_add_relu_us']:6.1f}  "
              f"err {e_tf:.2g}/{e_cu:.2g} {e_tfa:.2g}/{e_cua:.2g}", flush=True)
    return rows


class FusedResNet(torch.nn.Module):
    """A timm ResNet (Bottleneck blocks) with BatchNorm folded into each convolution and every
    convolution + bias (+ shortcut) + ReLU as one cuDNN call."""

    def __init__(self, m):
        super().__init__()
        from torch.nn.utils.fusion import fuse_conv_bn_eval

        def fold(conv, bn):
            c = fuse_conv_bn_eval(conv, bn)
            return (c.weight.detach().contiguous(memory_format=torch.channels_last), c.bias.detach(), c.stride, c.padding)

        self.stem = fold(m.conv1, m.bn1)
        self.blocks = []
        for layer in (m.layer1, m.layer2, m.layer3, m.layer4):
            for blk in layer:
                ds = fold(blk.downsample[0], blk.downsample[1]) if blk.downsample is not None else None
                self.blocks.append((fold(blk.conv1, blk.bn1), fold(blk.conv2, blk.bn2), fold(blk.conv3, blk.bn3), ds))
        self.fc = m.fc

    @staticmethod
    def _relu(x, c):
        w, b, s, p = c
        return torch.ops.aten.cudnn_convolution_relu(x, w, b, list(s), list(p), [1, 1], 1)

    def forward(self, x):
        x = self._relu(x, self.stem)
        x = F.max_pool2d(x, 3, 2, 1)
        for c1, c2, c3, ds in self.blocks:
            h = self._relu(self._relu(x, c1), c2)
            bias = c3[1]
            if ds is not None:
                sc = F.conv2d(x, ds[0], None, ds[2], ds[3])
                bias = bias + ds[1]
            else:
                sc = x
            x = torch.ops.aten.cudnn_convolution_add_relu(h, c3[0], sc, 1.0, bias, list(c3[2]), list(c3[3]), [1, 1], 1)
        return self.fc(x.mean((2, 3)))


def whole_model(batch: int) -> dict:
    import timm

    import torchfuse
    torch.manual_seed(0)
    cl = torch.channels_last
    model = timm.create_model("resnet50", pretrained=False).cuda().eval().half().to(memory_format=cl)
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.half).to(memory_format=cl)
    out = {}
    with torch.no_grad():
        ref = model.float()(x.float()).double()
        model.half()
        fused = FusedResNet(model)
        static = x.clone()
        g_out = None
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fused(static)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            g_out = fused(static)
        g.replay()
        torch.cuda.synchronize()
        out["err_cudnn_fused"] = (g_out.double() - ref).abs().max().item()
        variants = {
            "cudnn_fused_graph": lambda: g.replay(),
            "inductor_reduce_overhead": torch.compile(model, mode="reduce-overhead"),
            "torchfuse_frozen": torchfuse.compile(model, mode="reduce-overhead", freeze=True),
            "torchfuse_frozen_no_epilogues": torchfuse.compile(model, mode="reduce-overhead", freeze=True,
                                                               conv_epilogues=False),
            "eager": model,
        }
        for name, fn in variants.items():
            call = fn if name == "cudnn_fused_graph" else (lambda fn=fn: fn(x))
            for _ in range(5):
                r = call()
            torch.cuda.synchronize()
            if name != "cudnn_fused_graph":
                out[f"err_{name}"] = (r.double() - ref).abs().max().item()
            times = []
            for _ in range(100):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                call()
                b.record()
                torch.cuda.synchronize()
                times.append(a.elapsed_time(b))
            out[f"{name}_ms"] = statistics.median(times)
    print(f"ResNet-50 batch {batch}: " + ", ".join(f"{k} {v:.4g}" for k, v in out.items()), flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--batches", default="1,8")
    p.add_argument("--out")
    p.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    p.add_argument("--skip-per-conv", action="store_true")
    p.add_argument("--skip-model", action="store_true")
    args = p.parse_args(argv)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    res = {"per_conv": [], "model": {}}
    for batch in map(int, args.batches.split(",")):
        if not args.skip_model:
            res["model"][batch] = whole_model(batch)
        if not args.skip_per_conv:
            res["per_conv"] += per_conv(batch, dtype)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
