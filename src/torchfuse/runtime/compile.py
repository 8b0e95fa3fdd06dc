"""Loading generated kernels and compiling them, in parallel, before their first launch.

Takes a :class:`~torchfuse.codegen.triton.KernelSource`; returns a :class:`Kernel` that
launches it. On a GPU the module's functions are Triton JIT functions; with
``Options.interpret`` they are re-wrapped for Triton's interpreter (and ``libdevice`` is
replaced by :mod:`torchfuse.runtime.interpreter_math`), so the same source runs on CPU tensors.
"""
from __future__ import annotations

import builtins
import concurrent.futures
import contextlib
import linecache
import logging
import sys
import threading
import time
import types
from typing import Any, Callable, Sequence

from ..codegen.helpers import HELPERS, HOST_VARIANTS
from ..codegen.triton import HEADER, KernelSource
from .cache import SourceStore

log = logging.getLogger("torchfuse.cache")
recompile_log = logging.getLogger("torchfuse.recompile")

_loaded: dict[tuple[str, bool, tuple[str, ...]], "Kernel"] = {}
_lock = threading.Lock()


def triton_options(fp_fusion: bool) -> dict:
    """Triton compile options of every generated kernel.

    ``enable_fp_fusion=fp_fusion``, and libdevice without flush-to-zero: Triton's default
    (``enable_reflect_ftz=True``) makes libdevice's fp32 functions, ``div_rn`` and ``sqrt_rn``
    flush subnormal inputs and results to zero, where PyTorch's CUDA kernels keep them
    (``expm1``, ``sin``, ``tanh``, ``rsqrt`` of a subnormal, or a quotient that underflows
    to one, differ otherwise)."""
    return {"enable_fp_fusion": fp_fusion, "enable_reflect_ftz": False}


class Kernel:
    """A loaded kernel.

    Attributes:
        source: the generated source.
        path: the file it was imported from.
        fn: the Triton JIT (or interpreted) function.
        interpret: whether it runs under Triton's interpreter.
    """

    def __init__(self, source: KernelSource, path, fns, interpret: bool):
        self.source = source
        self.path = path
        self.fns = fns
        self.interpret = interpret
        #: with ``TORCHFUSE_LOGS=recompile``: per stage, the :func:`describe_args` of each
        #: warm-up, so that a compile at launch can say what the warm-ups did not cover
        self.warmed: dict[int, list[tuple]] = {}

    def launch(self, stage: int, grid: tuple, args: Sequence, XBLOCK: int, RBLOCK: int, num_warps: int,
               binaries: dict | None = None, spec_key: Any = None, device_index: int = 0,
               fp_fusion: bool = True) -> None:
        """Run stage ``stage`` on ``grid`` programs (a 1- or 2-tuple). ``args`` follow
        ``source.params``.

        With ``binaries`` (a dict owned by the caller's launch plan) and ``spec_key`` (what
        Triton specializes the compiled code on that can change between calls with one plan:
        pointer alignment, scalar arguments), later launches call the compiled binary
        directly, skipping Triton's per-call argument binding (tens of microseconds).
        """
        fn = self.fns[stage]
        if self.interpret:
            import numpy as np

            # lanes outside the mask compute on the loads' fill values (0 / 0 and the like), as
            # on a GPU, where nothing warns; NumPy would print a RuntimeWarning for each
            # one launch at a time: the interpreter, and the patching of ``triton.language`` around
            # it, keep process-wide state (two threads' launches failed as a missing @triton.jit)
            with _INTERPRETER_LOCK, interpreter_stdlib(), np.errstate(all="ignore"):
                fn[grid](*args, XBLOCK=XBLOCK, RBLOCK=RBLOCK)
            return
        if binaries is not None and _FAST_LAUNCH and not launch_hooks_set():
            key = (stage, spec_key)
            hit = binaries.get(key)
            if hit is not None:
                hit(grid[0], grid[1] if len(grid) > 1 else 1, raw_stream(device_index), [*args, XBLOCK, RBLOCK])
                return
            t0 = time.perf_counter()
            # Triton's compiled kernel without launching it, so that it is loaded for PyTorch's
            # launcher and Triton's own (a C compiler run for its signature) is never built
            compiled = fn.warmup(*args, grid=grid, XBLOCK=XBLOCK, RBLOCK=RBLOCK, num_warps=num_warps,
                                 **triton_options(fp_fusion))
            if recompile_log.isEnabledFor(logging.INFO):
                # seconds here, not milliseconds, mean Triton compiled at the launch: a
                # specialization the compile before the first call did not cover
                recompile_log.info("%s stage %d: first launch with specialization %s took %.3f s (%s)",
                                   self.source.name, stage, spec_key, time.perf_counter() - t0,
                                   self.coverage(stage, args, XBLOCK, RBLOCK, num_warps, fp_fusion))
            binary = binary_of(compiled, device_index)
            if binary is not None:
                binaries[key] = binary
                binary(grid[0], grid[1] if len(grid) > 1 else 1, raw_stream(device_index), [*args, XBLOCK, RBLOCK])
                return
        fn[grid](*args, XBLOCK=XBLOCK, RBLOCK=RBLOCK, num_warps=num_warps, **triton_options(fp_fusion))

    def warmup(self, stage: int, grid: tuple, args: Sequence, XBLOCK: int, RBLOCK: int, num_warps: int,
               fp_fusion: bool = True) -> None:
        """Compile for these argument types without running (no-op under the interpreter);
        returns Triton's compiled kernel (``None`` under the interpreter).

        ``fp_fusion=False`` forbids contracting a multiply and an add into one fused
        multiply-add, so fp32 chains round after every op as eager's separate kernels do."""
        if self.interpret:
            return None
        if recompile_log.isEnabledFor(logging.INFO):
            self.warmed.setdefault(stage, []).append(describe_args(args, XBLOCK, RBLOCK, num_warps, fp_fusion))
        return self.fns[stage].warmup(*args, grid=grid, XBLOCK=XBLOCK, RBLOCK=RBLOCK, num_warps=num_warps,
                                      **triton_options(fp_fusion))

    def coverage(self, stage: int, args: Sequence, XBLOCK: int, RBLOCK: int, num_warps: int,
                 fp_fusion: bool) -> str:
        """Whether a warm-up of ``stage`` had these arguments' specialization
        (:func:`describe_args`) and, if not, where the nearest warm-up differs: for the
        recompile log, which tells a compile at launch from a module load."""
        launch = describe_args(args, XBLOCK, RBLOCK, num_warps, fp_fusion)
        warmed = self.warmed.get(stage, [])
        if launch in warmed:
            return "its warm-up had this specialization"
        if not warmed:
            return "no warm-up in this process"

        def diff(w):
            return [i for i in range(max(len(w), len(launch))) if i >= min(len(w), len(launch)) or w[i] != launch[i]]

        def name(i):
            return launch[i][0] if i < len(launch) and launch[i][0] in _CONSTANTS else f"argument {i}"
        near = min(warmed, key=lambda w: len(diff(w)))
        return "not warmed up: " + "; ".join(
            f"{name(i)}: warm-up {near[i] if i < len(near) else None}, launch {launch[i] if i < len(launch) else None}"
            for i in diff(near)[:4])


_CONSTANTS = ("XBLOCK", "RBLOCK", "num_warps", "fp_fusion")


def int_spec(x) -> tuple:
    """What Triton specializes a scalar argument on (1, divisible by 16, fits 32 bits); a
    non-integer's type name."""
    if isinstance(x, bool) or not isinstance(x, int):
        return (type(x).__name__,)
    return (x == 1, x % 16 == 0, -(2**31) <= x < 2**31)


def describe_arg(a) -> tuple | None:
    """What Triton's compiled code specializes on for one argument: a tensor's dtype, device
    and 16-byte alignment; a bool's value; an integer's :func:`int_spec`; a float; ``None``
    for anything else."""
    import torch

    if isinstance(a, torch.Tensor):
        return (str(a.dtype).removeprefix("torch."), str(a.device), "aligned" if a.data_ptr() % 16 == 0 else "unaligned")
    if isinstance(a, bool):
        return ("bool", a)
    if isinstance(a, int):
        return ("int",) + int_spec(a)
    if isinstance(a, float):
        return ("float",)
    return None


def describe_args(args: Sequence, XBLOCK: int, RBLOCK: int, num_warps: int, fp_fusion: bool) -> tuple:
    """:func:`describe_arg` of each argument (another kind: its type name), followed by the
    launch constants."""
    out = tuple(describe_arg(a) or (type(a).__name__,) for a in args)
    return out + tuple(zip(_CONSTANTS, (XBLOCK, RBLOCK, num_warps, fp_fusion)))


def _triton_version() -> tuple[int, int]:
    import triton

    try:
        major, minor = triton.__version__.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (0, 0)


#: Triton 3.3 and later launch a compiled kernel as ``run(gx, gy, gz, stream, function,
#: packed_metadata, launch_metadata, enter_hook, exit_hook, *all_params)``; the fast path
#: calls exactly that, and older versions go through the JIT every time.
_FAST_LAUNCH = _triton_version() >= (3, 3)
#: one interpreted launch at a time (see :meth:`Kernel.launch`)
_INTERPRETER_LOCK = threading.RLock()


class TritonBinary:
    """A compiled stage launched through Triton's own launcher (``CompiledKernel.run``: its
    Python wrapper, then its C launcher for the argument signature).

    Args:
        run, function, packed: the compiled kernel's ``run``, ``function`` (the loaded
            ``CUfunction``, an int) and ``packed_metadata``.
    """

    __slots__ = ("run", "function", "packed")

    def __init__(self, run: Callable, function: Any, packed: Any):
        self.run, self.function, self.packed = run, function, packed

    def __call__(self, gx: int, gy: int, stream: int, args: Sequence) -> None:
        """Launch on ``gx`` x ``gy`` programs; ``args``: every parameter of the kernel, in order,
        constexprs included (pointers as ints)."""
        self.run(gx, gy, 1, stream, self.function, self.packed, None, None, None, *args)

    def source(self, k: int, gx: int, gy: int, args: list[str], ns: dict) -> str:
        """The same launch as one line of generated Python, with ``args`` the parameters' texts;
        binds its constants in ``ns`` under names ending in ``k``."""
        ns[f"R{k}"], ns[f"F{k}"], ns[f"K{k}"] = self.run, self.function, self.packed
        return f"R{k}({gx}, {gy}, 1, stream, F{k}, K{k}, None, None, None, {', '.join(args)})"


class StaticBinary:
    """A compiled stage launched through PyTorch's C++ launcher for Triton kernels
    (``torch._C._StaticCudaLauncher._launch_kernel``, the one Inductor's generated code
    launches with): one C call that parses the arguments by a type string and calls
    ``cuLaunchKernel``, without Triton's per-launch Python (its host cost is in
    benchmarks/NOTES.md). The ``CUfunction`` is the one Triton loaded.

    Args:
        launch: ``_launch_kernel``.
        function: the loaded ``CUfunction`` (an int).
        num_warps, shared: launch configuration (threads are 32 x ``num_warps``; bytes of
            dynamic shared memory).
        types: one character per argument passed (``O`` pointer, ``i`` int32, ``l`` int64,
            ``f`` fp32, ...), the parameters that are not constexprs, then the scratch
            pointers.
        keep: positions of the passed parameters among all of the kernel's parameters.
        tail: the scratch pointers (``None``: no scratch memory), as Triton's launcher passes them.
    """

    __slots__ = ("launch", "function", "num_warps", "shared", "types", "keep", "tail")

    def __init__(self, launch: Callable, function: int, num_warps: int, shared: int, types: str,
                 keep: tuple[int, ...], tail: tuple):
        self.launch, self.function, self.num_warps, self.shared = launch, function, num_warps, shared
        self.types, self.keep, self.tail = types, keep, tail

    def __call__(self, gx: int, gy: int, stream: int, args: Sequence) -> None:
        """As :meth:`TritonBinary.__call__`."""
        passed = tuple(args[i] for i in self.keep) + self.tail
        self.launch(self.function, gx, gy, 1, self.num_warps, self.shared, self.types, passed, stream)

    def source(self, k: int, gx: int, gy: int, args: list[str], ns: dict) -> str:
        """As :meth:`TritonBinary.source`."""
        ns[f"R{k}"], ns[f"F{k}"], ns[f"T{k}"] = self.launch, self.function, self.types
        passed = [args[i] for i in self.keep] + ["None"] * len(self.tail)
        return (f"R{k}(F{k}, {gx}, {gy}, 1, {int(self.num_warps)}, {int(self.shared)}, T{k}, "
                f"({', '.join(passed)},), stream)")


#: the C++ launcher's character for each Triton scalar type (the launcher's contract; pointers: ``O``)
_TYPE_CHARS = {"i1": "i", "i8": "b", "i16": "h", "i32": "i", "i64": "l", "u1": "I", "u8": "B", "u16": "H",
               "u32": "I", "u64": "K", "fp16": "f", "bf16": "f", "fp32": "f", "f32": "f", "fp64": "d"}


#: (Triton's kernel hash, CUDA device index) -> (``CUfunction``, registers a thread) of each
#: binary loaded by :func:`load_cubin`; modules stay loaded for the process, as Triton's do
_cubins: dict[tuple[str, int], tuple[int, int]] = {}
_cubin_lock = threading.Lock()


def load_cubin(compiled: Any, device: int) -> tuple[int, int] | None:
    """Load Triton's compiled kernel ``compiled`` onto CUDA device ``device`` with PyTorch's
    loader for Triton binaries (``torch._C._StaticCudaLauncher._load_kernel``, which Inductor
    uses: it also raises the kernel's dynamic shared-memory limit when it needs more than
    48 KiB), once per kernel and device.

    Triton's own loading (``CompiledKernel._init_handles``) first builds a C launcher for the
    kernel's argument signature, a C compiler run on an empty cache that PyTorch's launcher
    does not need (the seconds it takes are in benchmarks/NOTES.md).

    Returns:
        ``(CUfunction, registers a thread)``; ``None`` when this PyTorch has no such loader, the
        binary is not a cubin file in Triton's cache, or the kernel asks for more shared memory
        or registers than a block may have on ``device`` (then Triton's loading, which raises
        ``OutOfResources``, reports it).
    """
    import torch

    key = (getattr(compiled, "hash", None), device)
    if key[0] is None:
        return None
    hit = _cubins.get(key)
    if hit is not None:
        return hit
    load = getattr(getattr(torch._C, "_StaticCudaLauncher", None), "_load_kernel", None)
    group = getattr(compiled, "metadata_group", None) or {}
    path = next((p for name, p in group.items() if name.endswith(".cubin")), None)
    meta = getattr(compiled, "metadata", None)
    if load is None or path is None or meta is None:
        return None
    props = torch.cuda.get_device_properties(device)
    shared = int(getattr(compiled, "shared", meta.shared))
    if shared > getattr(props, "shared_memory_per_block_optin", props.shared_memory_per_block):
        return None
    with _cubin_lock:
        hit = _cubins.get(key)
        if hit is not None:
            return hit
        try:
            loaded = load(str(path), compiled.name, shared, device)
        except Exception as e:  # a cubin gone from the cache, a driver refusal: Triton's loading decides
            log.info("%s: not loaded with PyTorch's loader (%s: %s)", compiled.name, type(e).__name__, e)
            return None
        # (module, function, registers, spills); PyTorch versions before the module handle omit it
        function, registers = loaded[-3], int(loaded[-2])
        if registers * 32 * int(meta.num_warps) > getattr(props, "regs_per_multiprocessor", 65536):
            return None
        _cubins[key] = (function, registers)
        return _cubins[key]


def static_binary(compiled: Any, device: int | None = None) -> StaticBinary | None:
    """A :class:`StaticBinary` for Triton's compiled kernel ``compiled``, or ``None`` when
    PyTorch has no such launcher or the kernel needs what it does not do: scratch memory,
    several CTAs a program, cooperative or programmatic-dependent launches, tensor descriptors.
    (Launch hooks are checked at every launch, by the callers.)

    The ``CUfunction`` is Triton's where Triton has loaded the kernel, else :func:`load_cubin`'s
    on CUDA device ``device`` (``None``: only a kernel Triton loaded is taken)."""
    import torch

    launcher = getattr(getattr(torch._C, "_StaticCudaLauncher", None), "_launch_kernel", None)
    src, meta = getattr(compiled, "src", None), getattr(compiled, "metadata", None)
    if launcher is None or src is None or meta is None:
        return None
    if (getattr(meta, "num_ctas", 1) != 1 or getattr(meta, "launch_cooperative_grid", False)
            or getattr(meta, "launch_pdl", False) or any(d != 1 for d in getattr(meta, "cluster_dims", None) or ())):
        return None
    tail = []
    for field in ("global_scratch_size", "profile_scratch_size"):
        if hasattr(meta, field):
            if getattr(meta, field):
                return None
            tail.append(None)
    names = list(src.fn.arg_names)

    def index(key):
        return names.index(key) if isinstance(key, str) else key[0] if isinstance(key, tuple) else key

    constants = {index(k) for k in getattr(src, "constants", {})}
    signature = {index(k): v for k, v in src.signature.items()}
    types, keep = [], []
    for i in range(len(names)):
        ty = signature.get(i, "constexpr")
        if ty == "constexpr" or i in constants:
            continue
        if not isinstance(ty, str):
            return None
        char = "O" if ty.startswith("*") else _TYPE_CHARS.get(ty)
        if char is None:  # tensor descriptors and other types the launcher does not parse
            return None
        types.append(char)
        keep.append(i)
    function = getattr(compiled, "function", None)
    if not isinstance(function, int):
        loaded = load_cubin(compiled, device) if device is not None else None
        if loaded is None:
            return None
        function = loaded[0]
    return StaticBinary(launcher, function, int(meta.num_warps), int(getattr(compiled, "shared", meta.shared)),
                        "".join(types) + "O" * len(tail), tuple(keep), tuple(tail))


def binary_of(compiled: Any, device: int | None = None) -> TritonBinary | StaticBinary | None:
    """How later launches call Triton's compiled kernel ``compiled`` directly: PyTorch's C++
    launcher where it can (:func:`static_binary`, loading the kernel on CUDA device ``device``
    if Triton has not), else Triton's (which loads it, and builds its C launcher, if
    needed); ``None`` when ``compiled`` has neither (then launches go through Triton's JIT)."""
    static = static_binary(compiled, device)
    if static is not None:
        return static
    if hasattr(compiled, "_init_handles") and not isinstance(getattr(compiled, "function", None), int):
        compiled._init_handles()  # Triton's loading: its C launcher and ``function``
    if all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata")):
        return TritonBinary(compiled.run, compiled.function, compiled.packed_metadata)
    return None


def registers_of(compiled: Any, device: int) -> int:
    """Registers a thread of Triton's compiled kernel ``compiled`` on CUDA device ``device``:
    from :func:`load_cubin`, else from Triton's own loading (which raises ``OutOfResources``
    for a kernel that does not fit a block)."""
    loaded = load_cubin(compiled, device)
    if loaded is not None:
        return loaded[1]
    compiled._init_handles()
    return int(compiled.n_regs)


def _hook_active(hook) -> bool:
    # Triton 3.5+ holds a HookChain, never None, empty unless someone added a hook
    calls = getattr(hook, "calls", None)
    return bool(calls) if calls is not None else hook is not None


_RUNTIME_KNOBS: list = []


def launch_hooks_set() -> bool:
    """A launch enter/exit hook is installed (then launches go through Triton's JIT, which
    calls them). Checked on every launch: hooks can be added at any time (profilers)."""
    if not _RUNTIME_KNOBS:
        import triton

        knobs = getattr(triton, "knobs", None)
        _RUNTIME_KNOBS.append(knobs.runtime if knobs is not None else None)
    rt = _RUNTIME_KNOBS[0]
    if rt is None:
        return True
    return _hook_active(rt.launch_enter_hook) or _hook_active(rt.launch_exit_hook)


def raw_stream(device_index: int) -> int:
    """The current CUDA stream of ``device_index``, as the integer handle Triton's launcher takes;
    0 for a negative index (no device: ``torchfuse bench host runtime`` times the launch paths
    with stub binaries on a CPU)."""
    import torch

    return torch._C._cuda_getCurrentRawStream(device_index) if device_index >= 0 else 0


_stdlib_wrappers: dict = {}


def _bf16_cast_impl(original):
    """The interpreter's casts, except that any cast to or from bf16 goes through PyTorch (the
    interpreter converts ints, fp64 and bool to bf16 with NumPy on bf16's uint16 storage)."""
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    to_torch = {tl.int1: torch.bool, tl.int8: torch.int8, tl.int16: torch.int16, tl.int32: torch.int32,
                tl.int64: torch.int64, tl.uint8: torch.uint8, tl.float16: torch.float16,
                tl.bfloat16: torch.bfloat16, tl.float32: torch.float32, tl.float64: torch.float64}

    def cast_impl(self, src, dst_type):
        s, d = src.dtype.scalar, dst_type.scalar
        if tl.bfloat16 in (s, d) and s in to_torch and d in to_torch and s != d:
            data = np.ascontiguousarray(src.data)
            t = torch.from_numpy(data.copy())
            if s == tl.bfloat16:
                t = t.view(torch.bfloat16)
            out = t.to(to_torch[d])
            if d == tl.bfloat16:
                out = _bf16_keeping_nan_signs(t, out.view(torch.int16)).numpy().view(np.uint16)
            else:
                out = out.numpy()
            return TensorHandle(out, d)
        return original(self, src, dst_type)

    return cast_impl


def _int1_comparisons(original):
    """The interpreter's binary operations, except that a comparison's result is typed ``int1``
    (as compiled Triton types it). The interpreter labels it with the left operand's type
    while its data is NumPy bools; splatting a comparison of two scalars to a block then
    fills the block with the left operand's type (fp64 ones and zeros), and a following
    ``&`` of that block with a boolean one raises in NumPy (``(c == 0) & (x >= 0)`` with ``c``
    a 0-dim constant of the graph, Triton 3.6 and 3.8)."""
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    comparisons = (np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal)

    def binary_op(self, lhs, rhs, op):
        if op in comparisons:
            return TensorHandle(np.asarray(op(lhs.data, rhs.data), dtype=np.bool_), tl.int1)
        return original(self, lhs, rhs, op)

    return binary_op


def _bf16_keeping_nan_signs(values, bits):
    """``bits`` (int16 bf16 patterns of ``values`` converted by PyTorch) with each NaN of a
    float ``values`` given its sign and leading payload bits, quieted, as an fp16 conversion
    keeps them. PyTorch's CPU conversion makes every NaN 0xFFFF in its vector loop and 0x7FC0
    in its scalar one, so only sign operations give a NaN a defined sign, and those (``-x``,
    ``copysign``) flip or set the sign bit of the 16-bit value itself in eager's bf16 kernels."""
    import torch

    if not values.dtype.is_floating_point or values.dtype == torch.bfloat16 or not bool(values.isnan().any()):
        return bits
    kept = (values.float().view(torch.int32) >> 16).to(torch.int16) | 0x0040
    return torch.where(values.isnan(), kept, bits)


def _rounding_convert_float(original):
    """The interpreter's float conversion, except that fp32/fp64 -> bf16/fp16 rounds to
    nearest even as GPUs and eager PyTorch do (the interpreter truncates bf16), a NaN keeping
    its sign (:func:`_bf16_keeping_nan_signs`)."""
    import numpy as np
    import torch
    import triton.language as tl

    narrow = {tl.bfloat16: torch.bfloat16, tl.float16: torch.float16}
    wide = {tl.float32: np.float32, tl.float64: np.float64}

    def convert(data, src, dst, rounding_mode):
        if src in wide and dst in narrow:
            values = np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=wide[src]).reshape(np.shape(data))
            t = torch.from_numpy(values.copy())
            bits = t.to(narrow[dst]).view(torch.int16)
            if dst == tl.bfloat16:
                bits = _bf16_keeping_nan_signs(t, bits)
            return bits.numpy().view(np.uint16)
        return original(data, src, dst, rounding_mode)

    return convert


# Attributes of a class that Python manages itself; never restored by hand.
_CLASS_INTERNALS = frozenset({"__dict__", "__weakref__", "__doc__", "__annotations__", "__annotate__"})


def _language_namespaces() -> list:
    """Modules and classes of ``triton.language`` whose attributes the interpreter replaces
    while a kernel runs (builtins, ``dtype.to_ir``, tensor methods, ``reduce``)."""
    import triton.language as tl

    spaces = [tl, tl.core, tl.math, tl.core.tensor, tl.core.dtype]
    if hasattr(tl.core, "tensor_descriptor_base"):
        spaces.append(tl.core.tensor_descriptor_base)
    return spaces


class interpreter_stdlib:
    """Context in which Triton's standard library (``tl.max``, ``tl.sum``, ``tl.zeros`` ...)
    runs under the interpreter even though Triton was imported without ``TRITON_INTERPRET``
    (the library's functions are then JIT functions, which the interpreter cannot call).

    On exit every attribute of ``triton.language`` that the interpreter replaced is put back.
    Triton's interpreter restores what a kernel launch patched, but a call of a library
    function from inside a kernel patches ``triton.language.core`` again and never restores
    it (measured with Triton 3.6 and 3.8: 63 builtins of ``tl.core`` stayed interpreter
    versions after one interpreted reduction). A CUDA kernel compiled later in the same
    process then failed in Triton's code generator (``tl.program_id(0) * XBLOCK`` reached the
    interpreter's ``mul``), and its fusion group fell back to ATen.
    """

    def __enter__(self):
        try:  # imported lazily by the interpreter; it must see the unpatched library
            import triton.experimental.gluon  # noqa: F401
        except ImportError:
            pass
        import triton.language as tl
        import triton.language.random as random
        import triton.language.standard as standard
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        from triton.runtime import interpreter as interp

        self.namespaces = [(ns, dict(vars(ns))) for ns in _language_namespaces()]
        self.saved = [(interp, "_convert_float", interp._convert_float),
                      (interp.InterpreterBuilder, "cast_impl", interp.InterpreterBuilder.cast_impl),
                      (interp.InterpreterBuilder, "binary_op", interp.InterpreterBuilder.binary_op)]
        interp._convert_float = _rounding_convert_float(interp._convert_float)
        interp.InterpreterBuilder.cast_impl = _bf16_cast_impl(interp.InterpreterBuilder.cast_impl)
        interp.InterpreterBuilder.binary_op = _int1_comparisons(interp.InterpreterBuilder.binary_op)
        for mod in (tl, standard, random):
            for name, obj in list(vars(mod).items()):
                if isinstance(obj, JITFunction):
                    wrapper = _stdlib_wrappers.get(id(obj))
                    if wrapper is None:
                        wrapper = _stdlib_wrappers[id(obj)] = (obj, InterpretedFunction(obj.fn))
                    self.saved.append((mod, name, obj))
                    setattr(mod, name, wrapper[1])
        return self

    def __exit__(self, *exc):
        for mod, name, obj in self.saved:
            setattr(mod, name, obj)
        for ns, before in self.namespaces:
            for name, value in list(vars(ns).items()):
                if name in _CLASS_INTERNALS or isinstance(value, types.ModuleType):
                    continue  # a submodule imported meanwhile is not a patch
                if name not in before:
                    delattr(ns, name)
                elif before[name] is not value:
                    setattr(ns, name, before[name])
            for name, value in before.items():
                if name not in _CLASS_INTERNALS and name not in vars(ns):
                    setattr(ns, name, value)
        return False


def _named(name: str, patterns: tuple[str, ...]) -> bool:
    """``name`` is one of ``patterns`` or starts with one ending in ``*``."""
    return any(name == p or (p.endswith("*") and name.startswith(p[:-1])) for p in patterns)


def load(source: KernelSource, store: SourceStore, interpret: bool, gpu_helpers: tuple[str, ...] = ()) -> Kernel:
    """Import ``source`` (once per process, mode and ``gpu_helpers``) and return its kernel.

    Under the interpreter each helper of :data:`~torchfuse.codegen.helpers.HOST_VARIANTS` runs
    as its host twin, except those named in ``gpu_helpers`` (names, or prefixes ending in
    ``*``: ``Tuning.runtime.interpreter_gpu_helpers``).

    Raises:
        SyntaxError, NameError, ImportError: the generated module is broken (a compiler bug);
            the caller runs the group through ATen and warns.
    """
    k = (source.key, interpret, tuple(gpu_helpers) if interpret else ())
    with _lock:
        if k in _loaded:
            return _loaded[k]
    path = store.path_for(source.key, source.text)
    modname = f"torchfuse_kernel_{source.key[:24]}_{'i' if interpret else 'j'}"
    if k[2]:  # another module for the same source with other helper forms
        modname += f"_{abs(hash(k[2])):x}"
    # The module runs from the text whose hash is its key, never from what the file or a
    # bytecode cache beside it holds now; linecache serves that same text to
    # ``inspect.getsource``, which @triton.jit reads (mtime None: never invalidated).
    module = types.ModuleType(modname)
    module.__file__ = str(path)
    linecache.cache[str(path)] = (len(source.text), None, source.text.splitlines(True), str(path))
    sys.modules[modname] = module
    if source.text.startswith(HEADER):
        # the helpers every module starts with are made once per process and helper forms
        # (a @triton.jit function each, whose source Triton reads: most of a module's load
        # time); the rest runs at its own line numbers in the text
        module.__dict__.update(_header_namespace(interpret, k[2]))
        rest = "\n" * HEADER.count("\n") + source.text[len(HEADER):]
        exec(builtins.compile(rest, str(path), "exec"), module.__dict__)
    else:
        exec(builtins.compile(source.text, str(path), "exec"), module.__dict__)
    if interpret:
        _interpreted(module.__dict__, HELPERS + source.stages, gpu_helpers)
    kernel = Kernel(source, path, [getattr(module, n) for n in source.stages], interpret)
    with _lock:
        _loaded.setdefault(k, kernel)
        return _loaded[k]


#: (interpret, helper forms) -> the names the kernel header defines, made once per process
_headers: dict[tuple, dict] = {}


def _header_namespace(interpret: bool, gpu_helpers: tuple[str, ...]) -> dict:
    """The kernel header's names (imports and helpers), executed once per process for these
    helper forms, as a module of its own whose text linecache serves to Triton. Under the
    interpreter its helpers are interpreted functions with their host twins in place, in its
    own namespace, which is their globals: a helper calling another gets the same form a kernel
    does."""
    key = (interpret, gpu_helpers)
    with _lock:
        names = _headers.get(key)
        if names is not None:
            return names
        suffix = f"{'i' if interpret else 'j'}{abs(hash(gpu_helpers)):x}"
        path = f"<torchfuse kernel header {suffix}>"
        module = types.ModuleType(f"torchfuse_kernel_header_{suffix}")
        module.__file__ = path
        linecache.cache[path] = (len(HEADER), None, HEADER.splitlines(True), path)
        sys.modules[module.__name__] = module
        exec(builtins.compile(HEADER, path, "exec"), module.__dict__)
        if interpret:
            _interpreted(module.__dict__, HELPERS, gpu_helpers)
        names = _headers[key] = {n: v for n, v in module.__dict__.items() if not n.startswith("__")}
        return names


def _interpreted(names: dict, functions: Sequence[str], gpu_helpers: tuple[str, ...]) -> None:
    """Make the Triton functions ``functions`` of the namespace ``names`` interpreted ones, with
    the interpreter's device math, and put each helper's host twin in its place (PyTorch's CPU
    kernels' rules) except for the helpers named in ``gpu_helpers``."""
    from triton.runtime.interpreter import InterpretedFunction

    from .interpreter_math import libdevice

    names["libdevice"] = libdevice
    for name in functions:
        obj = names.get(name)
        if obj is not None and not isinstance(obj, InterpretedFunction):  # (the helpers on demand
            names[name] = InterpretedFunction(getattr(obj, "fn", obj))    # are there only when called)
    for name, host in HOST_VARIANTS.items():
        if host in names and not _named(name, gpu_helpers):
            names[name] = names[host]


def compile_all(jobs: list[tuple], threads: int,
                on_done: Callable[[], None] | None = None) -> list[BaseException | None]:
    """Compile several kernels at once (Triton's compiler runs LLVM and ptxas outside the GIL),
    each distinct job once (:func:`job_identity`: groups whose generated source is the same
    share one compilation).

    Args:
        jobs: ``(kernel, stage, grid, args, XBLOCK, RBLOCK, num_warps, fp_fusion)`` each.
        threads: worker threads.
        on_done: called once per finished job (from the worker threads), e.g. to count
            progress (:mod:`torchfuse.runtime.progress`).

    Returns:
        Per job, ``None`` or the exception its compilation raised.
    """
    import torch

    if not jobs:
        return []
    first: dict = {}  # job identity -> index of its first job
    distinct = []
    for i, job in enumerate(jobs):
        ident = job_identity(job)
        if ident is None or ident not in first:
            if ident is not None:
                first[ident] = i
            distinct.append(i)

    def one(job):
        try:
            # a new thread's current CUDA device is 0: compile and load for the job's own device
            # (a rank's GPU under DDP), never touching another GPU's context
            device = job_device(job)
            with torch.cuda.device(device) if device is not None else contextlib.nullcontext():
                compiled = job[0].warmup(*job[1:])
                # Load the binary here, in parallel, not serially at the first call; with
                # PyTorch's loader where the kernel will be launched by PyTorch's launcher, so that
                # Triton's C launcher for its argument signature (a C compiler run) is not built
                if compiled is not None and (device is None or static_binary(compiled, device) is None):
                    getattr(compiled, "_init_handles", lambda: None)()
            return None
        except BaseException as e:  # reported per kernel; the group falls back to ATen
            return e
        finally:
            if on_done is not None:
                on_done()

    todo = [jobs[i] for i in distinct]
    if len(todo) == 1 or threads <= 1:
        done = [one(j) for j in todo]
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(threads, len(todo))) as pool:
            done = list(pool.map(one, todo))
    by_index = dict(zip(distinct, done))
    results = []
    for i, job in enumerate(jobs):
        if i not in by_index:  # a duplicate: the result of its first job
            by_index[i] = by_index[first[job_identity(job)]]
            if on_done is not None:
                on_done()
        results.append(by_index[i])
    return results


def job_device(job: tuple) -> int | None:
    """The CUDA device index of a compile job's tensor arguments, or ``None`` (CPU tensors)."""
    import torch

    for a in job[3]:
        if isinstance(a, torch.Tensor) and a.device.type == "cuda":
            return a.device.index if a.device.index is not None else torch.cuda.current_device()
    return None


def job_identity(job: tuple) -> tuple | None:
    """What Triton compiles a job into: the kernel (its source key) and stage, the launch
    constants, and per argument what the compiled code specializes on (a tensor's dtype,
    device and 16-byte alignment; an integer's value when it is 1, else whether it is a
    multiple of 16: :func:`describe_arg`). ``None`` for an argument of another kind (the job
    is compiled anyway)."""
    kernel, stage, _grid, args, xblock, rblock, num_warps, fp_fusion = job
    described = tuple(describe_arg(a) for a in args)
    if None in described:
        return None
    return (kernel.source.key, stage, described, xblock, rblock, num_warps, fp_fusion)
