"""2-D max pooling as Triton kernels: ``aten.max_pool2d_with_indices`` and its backward.

Takes a call node of either op and, when its input is a 4-D floating-point tensor and the
pooled sizes are static, gives a runner ``run(env, sym_key, sym_values)`` that writes what ATen
writes with one kernel launch, in the format PyTorch suggests for the input (operands not
contiguous in it are copied first, as ATen copies them); any other pooling stays an ATen call
(:func:`pool_runner` returns ``None``).

Why: the image classifiers' stem (ResNet-50's 3x3, stride 2 pool of a 112x112 map) runs ATen's
kernels at 0.41 ms forward and 0.91 ms backward a training step at batch 128 on an H200, far
from the bytes they move (benchmarks/NOTES.md, "max pooling as kernels").

Values are ATen's to the bit: the forward visits a window's rows, then columns, in order and
takes an element when it is greater than the running maximum or NaN (so the first of equal
maxima and the last NaN win; ``-0.0`` and ``0.0`` tie), starting from ``-inf`` at the window's
first element inside the input, and stores the element's own bits; indices are ``h * W + w``
in the input plane, as int64. The backward gathers, for each input element, the gradients of
the windows whose index names it, in ascending window order, summed in float32 (float64 for
float64) from zero and rounded once, as ATen's CUDA kernels do (its CPU kernel scatters in the
same order). Where ATen's channels-last CUDA kernels differ from its CPU kernels (the index of
a window that takes no element; an element in a single window, whose gradient is copied, not
added to zero), the kernels follow the device's (:func:`pool_source`).

The kernels are fixed text with the pooling's constants written in (not generated from a
fusion group), loaded and cached as generated kernels are, so they run on CPU tensors under
Triton's interpreter too. A kernel that fails to compile or launch warns once and leaves the
pooling to ATen.
"""
from __future__ import annotations

import hashlib
import logging
import warnings

import torch
from torch._prims_common import suggest_memory_format

from ..codegen.triton import HEADER, KernelSource
from ..ir.graph import Node, Value
from .cache import SourceStore
from .compile import load

log = logging.getLogger("torchfuse.schedule")

_FORWARD = torch.ops.aten.max_pool2d_with_indices.default
_BACKWARD = torch.ops.aten.max_pool2d_with_indices_backward.default
_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

#: One program takes a tile of ``RBLOCK`` rows by ``XBLOCK`` columns of the result: in the
#: channels-first format rows are (image, channel, result row) and columns the result's
#: columns, in the channels-last format rows are (image, row, column) and columns the
#: channels, so that a row's elements are adjacent in memory and the division of a flat index
#: into coordinates is done once a row.
_PROLOGUE = '''    r = tl.program_id(0){wide} * RBLOCK + tl.arange(0, RBLOCK)[:, None]
    q = tl.program_id(1) * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    valid = (r < rows) & (q < cols)
    {decompose}'''

_FORWARD_KERNEL = '''

@triton.jit
def {name}(x_ptr, out_ptr, idx_ptr, C, H, W, OH, OW, rows, cols, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
{prologue}
    hstart = oh * {SH} - {PH}
    wstart = ow * {SW} - {PW}
    # the first row and column inside the input (ATen's initial index)
    h0 = tl.where(hstart < 0, hstart + ((-hstart + {DH} - 1) // {DH}) * {DH}, hstart)
    w0 = tl.where(wstart < 0, wstart + ((-wstart + {DW} - 1) // {DW}) * {DW}, wstart)
    best_idx = {initial} + tl.zeros([RBLOCK, XBLOCK], tl.int32)
    best = tl.full([RBLOCK, XBLOCK], float("-inf"), {acc})
    # the maximum's own bits (a NaN's payload), compared in the accumulator's type
    kept = tl.full([RBLOCK, XBLOCK], float("-inf"), tl.float32).to(out_ptr.dtype.element_ty)
    for kh in tl.static_range({KH}):
        h = hstart + kh * {DH}
        for kw in tl.static_range({KW}):
            w = wstart + kw * {DW}
            inside = valid & (h >= 0) & (h < H) & (w >= 0) & (w < W)
            raw = tl.load(x_ptr + base + (h * W + w) * step, mask=inside, other=float("-inf"))
            v = raw.to({acc})
            take = inside & ((v > best) | (v != v))
            best_idx = tl.where(take, h * W + w, best_idx)
            best = tl.where(take, v, best)
            kept = tl.where(take, raw, kept)
    tl.store(out_ptr + o, kept, mask=valid)
    {store_indices}
'''

_BACKWARD_KERNEL = '''

@triton.jit
def {name}(g_ptr, idx_ptr, out_ptr, C, H, W, OH, OW, rows, cols, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
{prologue}
    # the windows that can hold (h, w): ATen's p_start and p_end
    phstart = tl.where(h + {PH} < {EH}, 0, (h + {PH} - {EH}) // {SH} + 1)
    phend = tl.minimum((h + {PH}) // {SH} + 1, OH)
    pwstart = tl.where(w + {PW} < {EW}, 0, (w + {PW} - {EW}) // {SW} + 1)
    pwend = tl.minimum((w + {PW}) // {SW} + 1, OW)
    target = h * W + w
    acc = tl.zeros([RBLOCK, XBLOCK], {acc})
    for a in tl.static_range({MH}):
        ph = phstart + a
        for b in tl.static_range({MW}):
            pw = pwstart + b
            ok = valid & (ph < phend) & (pw < pwend)
            at = base + (ph * OW + pw) * step
            chosen = tl.load(idx_ptr + at, mask=ok, other=-1)
            g = tl.load(g_ptr + at, mask=ok, other=0).to({acc})
            acc = tl.where(ok & (chosen == target), acc + g, acc)
    result = acc.to(out_ptr.dtype.element_ty)
    {single}
    tl.store(out_ptr + o, result, mask=valid)
'''

#: ATen's channels-last CUDA kernel copies the gradient of an element's only window as it is
#: (its bits: -0.0 stays -0.0) rather than adding it to zero
_SINGLE_WINDOW = """one = (phend - phstart == 1) & (pwend - pwstart == 1)
    at0 = base + (phstart * OW + pwstart) * step
    chosen0 = tl.load(idx_ptr + at0, mask=valid & one, other=-1)
    g0 = tl.load(g_ptr + at0, mask=valid & one, other=0)
    result = tl.where(one, tl.where(chosen0 == target, g0, 0).to(out_ptr.dtype.element_ty), result)"""

# a tile's coordinates: ``{row}``/``{col}`` of the result's plane (``{ROWS}`` x ``{COLS}``);
# ``base + (row * width + col) * step`` addresses the other operand's plane (``{rows}`` x
# ``{cols}``); ``o`` is the result's offset
_CHANNELS_FIRST = """{col} = q
    {row} = r % {ROWS}
    base = (r // {ROWS}) * {rows} * {cols}
    step = 1
    o = r * {COLS} + q"""
_CHANNELS_LAST = """{col} = r % {COLS}
    t = r // {COLS}
    {row} = t % {ROWS}
    base = (t // {ROWS}) * {rows} * {cols} * C + q
    step = C
    o = r * C + q"""

_PARAMS = ("a_ptr", "b_ptr", "c_ptr", "C", "H", "W", "OH", "OW", "rows", "cols")


def _decompose(channels_last: bool, out_rows: str, out_cols: str, in_rows: str, in_cols: str, row: str,
               col: str) -> str:
    form = _CHANNELS_LAST if channels_last else _CHANNELS_FIRST
    return form.format(row=row, col=col, ROWS=out_rows, COLS=out_cols, rows=in_rows, cols=in_cols)


def pool_source(backward: bool, params: tuple, dtype: torch.dtype, channels_last: bool,
                indices: bool = True, wide: bool = False, cuda: bool = True) -> KernelSource:
    """The module of one max-pool kernel: the kernel header, then the kernel.

    Args:
        backward: the gradient's kernel (else the forward's).
        params: ``(KH, KW, SH, SW, PH, PW, DH, DW)``, written into the text.
        dtype: the input's dtype (the accumulator is float64 for float64, else float32).
        channels_last: the tensors' format (all of one call share it).
        indices: the forward also writes the indices.
        wide: offsets may reach 2**31 (int64 arithmetic; else int32, several times cheaper).
        cuda: follow ATen's CUDA kernels where they differ from its CPU kernels (both in
            the channels-last format only): a window that takes no element (all ``-inf``, or
            all padding) has index 0, not its first element's; an input element in a single
            window gets that window's gradient as it is, not added to zero.
    """
    KH, KW, SH, SW, PH, PW, DH, DW = params
    acc = "tl.float64" if dtype == torch.float64 else "tl.float32"
    aten_cuda_cl = cuda and channels_last
    layout = ("cl" if channels_last else "cf") + ("_wide" if wide else "") + ("_cuda" if aten_cuda_cl else "")
    widen = ".to(tl.int64)" if wide else ""
    shape = f"{KH}x{KW}s{SH}x{SW}p{PH}x{PW}d{DH}x{DW}"
    if backward:
        name = f"tf_max_pool2d_backward_{shape}_{layout}"
        EH, EW = (KH - 1) * DH + 1, (KW - 1) * DW + 1
        text = _BACKWARD_KERNEL.format(
            name=name, prologue=_PROLOGUE.format(wide=widen, decompose=_decompose(
                channels_last, "H", "W", "OH", "OW", "h", "w")), acc=acc,
            single=_SINGLE_WINDOW if aten_cuda_cl else "pass",
            SH=SH, SW=SW, PH=PH, PW=PW, EH=EH, EW=EW, MH=(EH - 1) // SH + 1, MW=(EW - 1) // SW + 1)
    else:
        name = f"tf_max_pool2d_{shape}_{layout}" + ("" if indices else "_values")
        store = "tl.store(idx_ptr + o, best_idx.to(tl.int64), mask=valid)" if indices else "pass"
        text = _FORWARD_KERNEL.format(
            name=name, prologue=_PROLOGUE.format(wide=widen, decompose=_decompose(
                channels_last, "OH", "OW", "H", "W", "oh", "ow")), acc=acc,
            KH=KH, KW=KW, SH=SH, SW=SW, PH=PH, PW=PW, DH=DH, DW=DW, store_indices=store,
            initial="0" if aten_cuda_cl else "(h0 * W + w0)")
    text = HEADER + text
    return KernelSource(name=name, text=text, key=hashlib.sha256(text.encode()).hexdigest(), params=_PARAMS,
                        stages=(name,))


def _pair(v, default=None) -> tuple[int, int] | None:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return default
    if type(v) is int:
        return (v, v)
    if isinstance(v, (list, tuple)) and all(type(x) is int for x in v):
        return (v[0], v[0]) if len(v) == 1 else (v[0], v[1]) if len(v) == 2 else None
    return None


def pool_params(node: Node, max_window: int = 64) -> tuple[tuple, bool] | None:
    """``((KH, KW, SH, SW, PH, PW, DH, DW), backward)`` of a max-pool call node the kernels
    take, else None: a 4-D floating-point input of static spatial sizes, constant pooling
    arguments (as PyTorch checks them: positive kernel, stride and dilation, padding at most
    half the kernel), a window of at most ``max_window`` elements (``Tuning``
    ``runtime.pool_max_window``), and static pooled sizes."""
    if node.target is _FORWARD:
        names = ("self", "kernel_size", "stride", "padding", "dilation", "ceil_mode")
        backward = False
    elif node.target is _BACKWARD:
        names = ("grad_output", "self", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "indices")
        backward = True
    else:
        return None
    if any(isinstance(v, Value) for v in node.kwargs.values()):
        return None  # tensors passed by keyword (traced graphs pass them by position)
    bound = dict(zip(names, node.args))
    bound.update(node.kwargs)
    x = bound.get("self")
    if not isinstance(x, Value) or x.meta is None or len(x.meta.shape) != 4 or x.meta.dtype not in _DTYPES:
        return None
    if not all(type(s) is int for s in x.meta.shape[2:]):
        return None
    k = _pair(bound.get("kernel_size"))
    s = _pair(bound.get("stride"), k)
    p = _pair(bound.get("padding", 0), (0, 0))
    d = _pair(bound.get("dilation", 1), (1, 1))
    if k is None or s is None or p is None or d is None or not isinstance(bound.get("ceil_mode", False), bool):
        return None
    if min(*k, *s, *d) < 1 or min(p) < 0 or p[0] > k[0] // 2 or p[1] > k[1] // 2:
        return None
    if k[0] * k[1] > max_window:
        return None  # the kernels unroll a window's loads: a large window is ATen's
    if backward:
        g = bound.get("grad_output")
        if not isinstance(g, Value) or g.meta is None or not isinstance(bound.get("indices"), Value):
            return None
        pooled = g.meta.shape
    else:
        pooled = None
    if pooled is not None and not all(type(v) is int for v in pooled[2:]):
        return None
    return (k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1]), backward


def _format_of(x: torch.Tensor) -> bool:
    """True where ATen pools ``x`` in the channels-last format, False for channels-first: the
    format PyTorch suggests from its strides (a tensor with a channel or spatial size of 1 is
    contiguous in both; its strides decide, as they decide the format of ATen's results)."""
    return suggest_memory_format(x) == torch.channels_last


def _in_format(fmt: bool, t: torch.Tensor) -> torch.Tensor:
    """``t`` contiguous in the format (the kernels' addressing): itself where it is, else a
    copy (a gapped slice, an expanded gradient). ATen's CUDA max-pool kernels copy their
    operands into the input's format the same way; its CPU backward pools in the gradient's
    format instead, with the same values and result strides. A copy changes no value."""
    return t.contiguous(memory_format=torch.channels_last if fmt else torch.contiguous_format)


class PoolRunner:
    """Runs one max-pool call (see the module): reads its tensors from the environment, takes
    the input's format at each call as ATen does (:func:`_format_of`), and writes the node's
    results, new tensors in that format; operands not contiguous in it (a gapped slice, an
    expanded gradient, a gradient of another format) are first copied into it
    (:func:`_in_format`). Launch configuration: a tile of ``tile`` result elements a
    program, its columns (the result's columns, or its channels in channels-last) a power of
    two up to ``xblock``, 4 warps.

    Args:
        node: the call node (:func:`pool_params` accepted it).
        params: its ``(KH, KW, SH, SW, PH, PW, DH, DW)``.
        backward: ``max_pool2d_with_indices_backward`` (else the forward).
        indices: the forward's indices are read by a later step (else it writes values only).
        slots: value -> slot of the graph's environment.
        interpret: run under Triton's interpreter (CPU tensors).
        store: the kernel cache.
        stats: the compiled graph's counters (``kernels_compiled``, ``kernels_cached``).
        tile, xblock: ``Tuning.runtime.pool_tile`` and ``pool_xblock`` (powers of two).
    """

    #: int32 offsets hold up to this many elements (less two tiles: a tile past the last row
    #: must not wrap around either); from there the kernels compute in int64
    INT32_ELEMENTS = 2**31

    def __init__(self, node: Node, params: tuple, backward: bool, indices: bool, slots: dict[Value, int],
                 interpret: bool, store: SourceStore, stats: dict, tile: int = 1024, xblock: int = 128):
        self.node, self.params, self.backward, self.indices = node, params, backward, indices
        self.tile, self.xblock = tile, xblock
        self.arg_slots = [slots[a] if isinstance(a, Value) else None for a in node.args]
        self.dst = slots[node.outputs[0]]
        self.interpret, self.store, self.stats = interpret, store, stats
        self.kernels: dict = {}
        self.binaries: dict = {}
        self.failed: str | None = None
        #: calls written by the kernels (the rest by ATen)
        self.launches = 0

    def _args(self, env: list) -> list:
        return [env[s] if s is not None else a for s, a in zip(self.arg_slots, self.node.args)]

    def _kernel(self, dtype: torch.dtype, channels_last: bool, wide: bool, cuda: bool):
        key = (dtype == torch.float64, channels_last, wide, cuda)
        kernel = self.kernels.get(key)
        if kernel is None:
            before = self.store.misses
            kernel = load(pool_source(self.backward, self.params, dtype, channels_last, self.indices, wide, cuda),
                          self.store, self.interpret)
            self.stats["kernels_compiled" if self.store.misses > before else "kernels_cached"] += 1
            self.kernels[key] = kernel
        return kernel

    def __call__(self, env: list, sym_key=None, sym_values=None) -> None:
        args = self._args(env)
        if self.failed is None:
            try:
                result = self._run(args)
            except Exception as e:  # a compiler or launch failure must not break the program
                self.failed = f"{type(e).__name__}: {e}"
                log.exception("max-pool kernel failed", exc_info=e)
                warnings.warn(f"torchfuse: a max-pool kernel failed ({self.failed}); pooling runs through ATen",
                              RuntimeWarning, stacklevel=2)
                result = None
            if result is not None:
                env[self.dst] = result
                self.launches += 1
                return
        env[self.dst] = self.node.target(*args, **self.node.kwargs)

    def _run(self, args: list):
        """The kernel's result, or None where ATen must run the call (a gradient whose shape
        is not the indices', no pooled element: ATen raises its own error)."""
        KH, KW, SH, SW, PH, PW, DH, DW = self.params
        if self.backward:
            g, x, idx = args[0], args[1], args[7]
            if g.shape != idx.shape:
                return None  # ATen raises its own error
            fmt = _format_of(x)
            g, idx = _in_format(fmt, g), _in_format(fmt, idx)
            n, c, h, w = x.shape
            oh, ow = g.shape[2], g.shape[3]
            out = torch.empty(x.shape, dtype=x.dtype, device=x.device,
                              memory_format=torch.channels_last if fmt else torch.contiguous_format)
            operands = (g, idx, out)
        else:
            n, c, h, w = args[0].shape
            ceil_mode = args[5] if len(args) > 5 else self.node.kwargs.get("ceil_mode", False)
            oh = _pooled(h, KH, SH, PH, DH, ceil_mode)
            ow = _pooled(w, KW, SW, PW, DW, ceil_mode)
            if oh < 1 or ow < 1:
                return None  # ATen raises its own error
            fmt = _format_of(args[0])
            x = _in_format(fmt, args[0])
            mf = torch.channels_last if fmt else torch.contiguous_format
            out = torch.empty((n, c, oh, ow), dtype=x.dtype, device=x.device, memory_format=mf)
            idx = torch.empty((n, c, oh, ow), dtype=torch.int64, device=x.device, memory_format=mf) \
                if self.indices else None
            operands = (x, out, idx if idx is not None else out)
        if out.numel():
            wide = max(x.numel(), out.numel()) >= self.INT32_ELEMENTS - 2 * self.tile
            if fmt:  # rows: (image, row, column) of the result; columns: channels
                rows, cols = out.numel() // c, c
            else:  # rows: (image, channel, row) of the result; columns: its columns
                rows, cols = out.numel() // out.shape[3], out.shape[3]
            XBLOCK = min(self.xblock, 1 << max(0, cols - 1).bit_length())
            RBLOCK = max(1, self.tile // XBLOCK)
            grid = (-(-rows // RBLOCK), -(-cols // XBLOCK))
            sizes = [c, h, w, oh, ow, rows, cols]
            # what Triton specializes on that can change between calls: addresses' alignment
            # and the sizes (integers divisible by 16, or equal to 1)
            spec = (fmt, wide, *(t.data_ptr() % 16 == 0 for t in operands), *sizes)
            self._kernel(x.dtype, fmt, wide, x.device.type == "cuda").launch(0, grid, [*operands, *sizes], XBLOCK, RBLOCK, 4,
                                                    binaries=self.binaries, spec_key=spec,
                                                    device_index=x.device.index or 0)
        return out if self.backward else (out, idx)


def _pooled(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """The pooled length of one spatial dim, as PyTorch computes it (``pooling_output_shape``
    in ATen's ``Pool.h``): with ``ceil_mode`` rounded up, less one where the last window would
    start in the right padding."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


#: the reason a max-pool call node carries once :func:`pool_runner` gave it to the kernels
#: (what ``explain`` reports)
POOL_KERNEL = "written by torchfuse's max-pool kernels (runtime.pool)"


def pool_runner(node: Node, steps: list, outputs: set, slots: dict[Value, int], options, store: SourceStore,
                stats: dict) -> PoolRunner | None:
    """A :class:`PoolRunner` for the call ``node`` when ``Tuning.runtime.pool_kernels`` is on
    and it is a max pooling the kernels take (:func:`pool_params`) on a CUDA device, or on a
    CPU under the interpreter; else None. ``steps`` and ``outputs``: the graph's steps and
    output values (whether the forward's indices are read). The node's reason becomes :data:`POOL_KERNEL`."""
    if not options.tuning.runtime.pool_kernels:
        return None
    found = pool_params(node, options.tuning.runtime.pool_max_window)
    if found is None:
        return None
    params, backward = found
    x = node.args[1] if backward else node.args[0]
    device = x.meta.device
    if not (device.type == "cuda" or (device.type == "cpu" and options.interpret)):
        return None
    result = node.outputs[0]
    getters = [s.outputs[0] for s in steps if isinstance(s, Node) and s.is_call and s.reason == "tuple element"
               and s.args[0] is result and tuple(s.args[1]) == (1,)]
    read = {v for s in steps for v in (s.input_values() if isinstance(s, Node) else s.inputs)} if getters else set()
    indices = backward or any(v in outputs or v in read for v in getters)
    node.reason = POOL_KERNEL
    runtime = options.tuning.runtime
    return PoolRunner(node, params, backward, indices, slots, options.interpret, store, stats, runtime.pool_tile,
                      runtime.pool_xblock)
