"""Zero padding of a matrix as one Triton kernel: the ``aten.constant_pad_nd`` calls that the
aligned matrix products (:func:`torchfuse.decompose.mm_padded`) make.

Takes a call node of ``aten.constant_pad_nd`` and, when it appends zero rows or columns to a
2-D floating-point tensor and returns a contiguous result, gives a runner
``run(env, sym_key, sym_values)`` that writes the padded tensor with one kernel launch; any
other pad stays an ATen call (:func:`pad_runner` returns ``None``).

Why: ATen pads in two kernels, a fill of the whole result and a copy into its top-left corner
through a strided view, which does not vectorize. GPT-2's language-model head at 8 x 512
tokens pads its fp16 gradient, ``[4096, 50257]``, to 50264 columns every training step: 0.21
ms of fill and 0.48 ms of copy on an H200, where one pass that reads each element once and
writes each once moves the same bytes as a device copy (the padded operands themselves are
what cuBLAS needs: its fast kernels take no odd K, benchmarks/NOTES.md).

The kernel is fixed text (not generated from a fusion group), loaded and cached as generated
kernels are (:func:`torchfuse.runtime.compile.load`), so it runs on CPU tensors under Triton's
interpreter too. A kernel that fails to compile or launch warns once and leaves the pad to ATen.
"""
from __future__ import annotations

import hashlib
import logging
import warnings

import torch

from ..codegen.triton import HEADER, KernelSource
from ..ir.graph import Node, Value
from .cache import SourceStore
from .compile import load

log = logging.getLogger("torchfuse.schedule")

_PAD = torch.ops.aten.constant_pad_nd.default

#: One program writes ``RBLOCK`` rows of ``XBLOCK`` columns; ``out_cols`` is a multiple of 8
#: in the aligned form, so that stores of 16-bit elements vectorize to 16 bytes.
_KERNEL = '''

@triton.jit
def {name}(in_ptr, out_ptr, rows, cols, in_s0, in_s1, out_rows, out_cols, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    {hint}r = tl.program_id(0).to(tl.int64) * RBLOCK + tl.arange(0, RBLOCK)[:, None]
    c = tl.program_id(1) * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    inside = (r < out_rows) & (c < out_cols)
    x = tl.load(in_ptr + r * in_s0 + c * in_s1, mask=inside & (r < rows) & (c < cols), other=0)
    tl.store(out_ptr + r * out_cols + c, x, mask=inside)
'''

_PARAMS = ("in_ptr", "out_ptr", "rows", "cols", "in_s0", "in_s1", "out_rows", "out_cols")


def pad_source(aligned: bool) -> KernelSource:
    """The pad kernel's module: the kernel header, then the kernel; ``aligned``: the result's
    row length is a multiple of 8 (told to the compiler, so stores vectorize)."""
    name = "tf_pad_zeros_aligned" if aligned else "tf_pad_zeros"
    hint = "out_cols = tl.multiple_of(out_cols, 8)\n    " if aligned else ""
    text = HEADER + _KERNEL.format(name=name, hint=hint)
    return KernelSource(name=name, text=text, key=hashlib.sha256(text.encode()).hexdigest(), params=_PARAMS,
                        stages=(name,))


def zero_pad(node: Node) -> tuple[int, int] | None:
    """``(rows, cols)`` appended by the pad ``node``, or None where it is not a zero pad that
    only appends (no negative or leading pads, no fill but +0.0) to a 2-D real tensor with a
    contiguous result."""
    if node.target is not _PAD or len(node.outputs) != 1 or node.kwargs:
        return None
    x = node.args[0]
    pad = node.args[1] if len(node.args) > 1 else None
    value = node.args[2] if len(node.args) > 2 else 0
    if not isinstance(x, Value) or x.meta is None or node.outputs[0].meta is None or not isinstance(pad, (list, tuple)):
        return None
    dtype = x.meta.dtype
    if len(x.meta.shape) != 2 or dtype == torch.bool or dtype.is_complex:
        return None
    # ``value`` of -0.0 or NaN fills with those bits, which ``other=0`` does not
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != 0 or str(float(value)) != "0.0":
        return None
    pads = list(pad) + [0] * (4 - len(pad))
    if len(pad) not in (2, 4) or not all(type(p) is int and p >= 0 for p in pads) or pads[0] or pads[2]:
        return None
    out = node.outputs[0].meta
    if not all(type(s) is int for s in (*out.shape, *out.stride)) or tuple(out.stride) != (out.shape[1], 1):
        return None
    return pads[3], pads[1]


class PadRunner:
    """Runs one zero pad (see the module) with the pad kernel: reads its input, of the node's
    shape and any strides, from the environment and writes a new contiguous tensor of the
    node's output shape and dtype. Launch configuration: ``XBLOCK`` columns (a power of two up
    to 1024) by ``RBLOCK`` rows, ``TILE`` elements a program.

    Args:
        node: the ``aten.constant_pad_nd`` call node (:func:`zero_pad` accepted it).
        slots: value -> slot of the graph's environment.
        interpret: run under Triton's interpreter (CPU tensors).
        store: the kernel cache.
        stats: the compiled graph's counters (``kernels_compiled``, ``kernels_cached``).
    """

    #: result elements a program writes (16 KiB of fp32, 8 KiB of 16-bit values)
    TILE = 4096

    def __init__(self, node: Node, slots: dict[Value, int], interpret: bool, store: SourceStore, stats: dict):
        self.node = node
        self.src, self.dst = slots[node.args[0]], slots[node.outputs[0]]
        out = node.outputs[0].meta
        self.out_shape = (int(out.shape[0]), int(out.shape[1]))
        self.dtype, self.device = out.dtype, out.device
        self.interpret, self.store, self.stats = interpret, store, stats
        self.kernel = None
        self.failed: str | None = None
        #: pads written by the kernel (the rest, after a failure, by ATen)
        self.launches = 0
        self.binaries: dict = {}
        rows, cols = self.out_shape
        self.XBLOCK = min(1024, 1 << max(0, cols - 1).bit_length())
        self.RBLOCK = max(1, self.TILE // self.XBLOCK)
        self.grid = (-(-rows // self.RBLOCK), -(-cols // self.XBLOCK))
        self.num_warps = 4 if self.XBLOCK * self.RBLOCK >= 1024 else 1

    def __call__(self, env: list, sym_key=None, sym_values=None) -> None:
        x = env[self.src]
        if self.failed is None:
            try:
                if self.kernel is None:
                    before = self.store.misses
                    self.kernel = load(pad_source(self.out_shape[1] % 8 == 0), self.store, self.interpret)
                    self.stats["kernels_compiled" if self.store.misses > before else "kernels_cached"] += 1
                out = torch.empty(self.out_shape, dtype=self.dtype, device=self.device)
                if not out.numel():  # no program to launch
                    env[self.dst] = out
                    return
                args = [x, out, x.shape[0], x.shape[1], x.stride(0), x.stride(1), *self.out_shape]
                # what Triton specializes on that can change between calls: the input's address
                # alignment and strides (the sizes are fixed)
                spec = (x.data_ptr() % 16 == 0, x.stride(0), x.stride(1))
                self.kernel.launch(0, self.grid, args, self.XBLOCK, self.RBLOCK, self.num_warps,
                                   binaries=self.binaries, spec_key=spec, device_index=self.device.index or 0)
                self.launches += 1
                env[self.dst] = out
                return
            except Exception as e:  # a compiler or launch failure must not break the program
                self.failed = f"{type(e).__name__}: {e}"
                log.exception("pad kernel failed", exc_info=e)
                warnings.warn(f"torchfuse: the pad kernel failed ({self.failed}); pads run through ATen",
                              RuntimeWarning, stacklevel=2)
        env[self.dst] = _PAD(x, self.node.args[1], *self.node.args[2:])


#: the reason a pad call node carries once :func:`pad_runner` gave it to the pad kernel
#: (what ``explain`` reports)
PAD_KERNEL = "written by torchfuse's pad kernel (runtime.pad)"


def pad_runner(node: Node, slots: dict[Value, int], options, store: SourceStore, stats: dict) -> PadRunner | None:
    """A :class:`PadRunner` for the call ``node`` when ``Tuning.runtime.pad_kernel`` is on and
    it is a zero pad the kernel writes (see :func:`zero_pad`) on a CUDA device, or on a CPU
    under the interpreter; else None. The node's reason becomes :data:`PAD_KERNEL`."""
    if not options.tuning.runtime.pad_kernel or zero_pad(node) is None:
        return None
    device = node.outputs[0].meta.device
    if not (device.type == "cuda" or (device.type == "cpu" and options.interpret)):
        return None
    node.reason = PAD_KERNEL
    return PadRunner(node, slots, options.interpret, store, stats)

