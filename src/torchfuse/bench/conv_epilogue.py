"""``torchfuse bench conv-epilogue``: is cuDNN's fused convolution epilogue (bias, residual
add, ReLU inside the convolution kernel) worth using for frozen inference? (CUDA only)

Two measurements, channels-last, CUDA graphs:

1. **Per convolution** (ResNet-50's shapes; fp16 or ``--dtype bf16``): ``relu(conv(x, w) + b)``
   as an ATen convolution plus torchfuse's fused pointwise kernel (mode ``relu``, backend
   ``torchfuse``, compiled with ``conv_epilogues=False``) against
   ``aten.cudnn_convolution_relu`` (backend ``cudnn-fused``); ``relu(conv(x, w) + b + z)``
   against ``aten.cudnn_convolution_add_relu`` (mode ``add-relu``); the convolution alone
   (mode ``conv``, eager). Device time per call from a CUDA graph of 20 calls
   (:func:`torchfuse.bench.timing.graph_us`); the largest error against float64 in ``extra``.
2. **Whole model** (fp16): ResNet-50 written by hand with BatchNorm folded (PyTorch's
   ``fuse_conv_bn_eval``) and every conv + bias (+ shortcut) + ReLU as one cuDNN call, captured
   in one CUDA graph (backend ``cudnn-fused-graph``), against torchfuse frozen (with and
   without the epilogues), Inductor ``reduce-overhead`` and eager in the same process: median
   ms per call, each call timed alone (events around it, synchronized after it).
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch
import torch.nn.functional as F

from . import timing
from .rows import add_row_arguments, provenance, save_rows

# (input H = W, in channels, out channels, kernel, stride) of ResNet-50's convolutions
SHAPES = [
    (224, 3, 64, 7, 2),
    (56, 64, 64, 1, 1), (56, 64, 64, 3, 1), (56, 64, 256, 1, 1), (56, 256, 64, 1, 1),
    (56, 256, 128, 1, 1), (56, 128, 128, 3, 2), (28, 128, 512, 1, 1), (28, 512, 128, 1, 1), (28, 128, 128, 3, 1),
    (28, 512, 256, 1, 1), (28, 256, 256, 3, 2), (14, 256, 1024, 1, 1), (14, 1024, 256, 1, 1), (14, 256, 256, 3, 1),
    (14, 1024, 512, 1, 1), (14, 512, 512, 3, 2), (7, 512, 2048, 1, 1), (7, 2048, 512, 1, 1), (7, 512, 512, 3, 1),
]
PRECISION = {torch.float16: "fp16", torch.bfloat16: "bf16"}


def per_conv(batch: int, dtype: torch.dtype, prov) -> list:
    import torchfuse

    from .variants import options_with

    cl = torch.channels_last
    rows = []
    for hw, cin, cout, k, stride in SHAPES:
        x = torch.randn(batch, cin, hw, hw, device="cuda", dtype=dtype).to(memory_format=cl)
        w = (torch.randn(cout, cin, k, k, device="cuda", dtype=dtype) / (cin * k * k) ** 0.5).to(memory_format=cl)
        b = torch.randn(cout, device="cuda", dtype=dtype)
        pad = k // 2
        z = torch.randn_like(F.conv2d(x, w, None, stride, pad))

        def ref_relu(x, w, b):
            return torch.relu(F.conv2d(x, w, None, stride, pad) + b.view(1, -1, 1, 1))

        def ref_add_relu(x, w, b, z):
            return torch.relu(F.conv2d(x, w, None, stride, pad) + b.view(1, -1, 1, 1) + z)

        # the pointwise epilogue as torchfuse fuses it without the rewrite being measured here
        options = options_with(["conv_epilogues=False"])
        tf_relu, tf_add = torchfuse.compile(ref_relu, options=options), torchfuse.compile(ref_add_relu, options=options)
        cud_relu = lambda: torch.ops.aten.cudnn_convolution_relu(x, w, b, [stride] * 2, [pad] * 2, [1, 1], 1)  # noqa: E731
        cud_add = lambda: torch.ops.aten.cudnn_convolution_add_relu(  # noqa: E731
            x, w, z, 1.0, b, [stride] * 2, [pad] * 2, [1, 1], 1)
        case = f"conv-epilogue/{hw}x{hw} {cin}->{cout} k{k} s{stride}/{batch}"
        with torch.no_grad():
            exact = ref_relu(x.double(), w.double(), b.double())
            exact_add = ref_add_relu(x.double(), w.double(), b.double(), z.double())
            measured = [
                ("conv", "eager", lambda: F.conv2d(x, w, None, stride, pad), None),
                ("relu", "torchfuse", lambda: tf_relu(x, w, b), exact),
                ("relu", "cudnn-fused", cud_relu, exact),
                ("add-relu", "torchfuse", lambda: tf_add(x, w, b, z), exact_add),
                ("add-relu", "cudnn-fused", cud_add, exact_add),
            ]
            line = []
            for mode, backend, call, reference in measured:
                err = (call().double() - reference).abs().max().item() if reference is not None else None
                us = timing.graph_us(call)
                line.append(f"{mode} {backend} {us:6.1f}")
                rows.append(prov.row("conv-epilogue", case, mode=mode, precision=PRECISION[dtype],
                                     layout="channels-last", backend=backend, device_ms=us / 1e3,
                                     extra={"max_abs_error": err} if err is not None else {}))
        print(f"{PRECISION[dtype]} b{batch} {hw:3d} {cin:4d}->{cout:4d} k{k} s{stride}: " + ", ".join(line), flush=True)
    return rows


class FusedResNet(torch.nn.Module):
    """A timm ResNet (Bottleneck blocks) with BatchNorm folded into each convolution and every
    convolution + bias (+ shortcut) + ReLU as one cuDNN call."""

    def __init__(self, m):
        super().__init__()
        from torch.nn.utils.fusion import fuse_conv_bn_eval

        def fold(conv, bn):
            c = fuse_conv_bn_eval(conv, bn)
            return (c.weight.detach().contiguous(memory_format=torch.channels_last), c.bias.detach(), c.stride,
                    c.padding)

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


def whole_model(batch: int, prov) -> list:
    import timm

    import torchfuse

    from .variants import options_with

    torch.manual_seed(0)
    cl = torch.channels_last
    model = timm.create_model("resnet50", pretrained=False).cuda().eval().half().to(memory_format=cl)
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.half).to(memory_format=cl)
    rows = []
    with torch.no_grad():
        ref = model.float()(x.float()).double()
        model.half()
        fused = FusedResNet(model)
        static = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fused(static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            graph_out = fused(static)
        variants = [
            ("cudnn-fused-graph", "", graph.replay, lambda: graph_out),
            ("torch.compile-reduce-overhead", "", torch.compile(model, mode="reduce-overhead"), None),
            ("torchfuse-reduce-overhead-frozen", "",
             torchfuse.compile(model, mode="reduce-overhead", options=options_with([], freeze=True)), None),
            ("torchfuse-reduce-overhead-frozen", "conv_epilogues=False",
             torchfuse.compile(model, mode="reduce-overhead", options=options_with(["conv_epilogues=False"], freeze=True)),
             None),
            ("eager", "", model, None),
        ]
        for backend, variant, fn, output in variants:
            call = fn if output is not None else (lambda fn=fn: fn(x))
            for _ in range(5):
                result = call()
            torch.cuda.synchronize()
            err = ((output() if output is not None else result).double() - ref).abs().max().item()
            ms = statistics.median(timing.time_steps(call, 1, "cuda")[0] for _ in range(100))
            print(f"ResNet-50 batch {batch}: {backend} {variant} {ms:.4g} ms (max |err| {err:.3g})", flush=True)
            rows.append(prov.row("conv-epilogue", f"conv-epilogue/resnet50/{batch}", mode="infer-fp16",
                                 precision="fp16", layout="channels-last", backend=backend, variant=variant,
                                 median_ms=ms, extra={"max_abs_error": err}))
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="torchfuse bench conv-epilogue", description=__doc__.splitlines()[0])
    p.add_argument("--batches", default="1,8")
    p.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"], help="of the per-convolution cases")
    p.add_argument("--skip-per-conv", action="store_true")
    p.add_argument("--skip-model", action="store_true")
    add_row_arguments(p)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("torchfuse bench conv-epilogue: needs a CUDA device (cuDNN's fused convolutions)", file=sys.stderr)
        return 1
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    prov = provenance(args.run_name, "cuda", argv, "conv-epilogue")
    rows = []
    for batch in map(int, args.batches.split(",")):
        if not args.skip_model:
            rows += whole_model(batch, prov)
        if not args.skip_per_conv:
            rows += per_conv(batch, dtype, prov)
    save_rows(args, "cuda", rows)
    return 0
