"""Instructions and registers of torchfuse's kernels compiled for an H200 (sm_90), on a machine
without a GPU.

Memory-bound kernels over 16-bit rows can be bound by instruction issue instead: a bf16
cross-entropy forward row kernel at 4096 elements a row ran at 41% of a device copy on an H200
while its fp32 form, with twice the bytes and fewer instructions, ran at 70%. This script runs
the cases of ``benchmarks/norms.py`` on CPU tensors under Triton's interpreter with the launch
configurations the heuristics pick on a GPU of 132 multiprocessors, records every kernel
launch (source, stage, argument types, XBLOCK, RBLOCK, warps), compiles each for sm_90 with
Triton's ahead-of-time compiler (no device needed) with the specializations Triton's JIT
would make for those arguments (16-byte aligned pointers, integers divisible by 16, integers
equal to 1) and the launch's multiply-add contraction setting (off under torchfuse's default
exact rounding), and disassembles the binary with the ``nvdisasm`` and ``cuobjdump`` that come
with Triton. It prints, per kernel, the SASS instructions of one thread's program (straight
line for a persistent kernel; a loop body counts once), the registers a thread, and the most
frequent opcodes.

Counts are of the binary Triton's version here builds (the GPU machine may run another
Triton), so compare variants with each other, not with another machine's numbers.

Usage::

    TORCHFUSE_INTERPRET=1 PYTHONPATH=src python benchmarks/sass_count.py --ops cross_entropy \\
        --shapes 512x4096 --dtypes bfloat16 [--backward] [--set codegen.triton.FLUSH_SUMMED_EXP=False]

``--set`` takes the same ``MODULE.NAME=VALUE`` assignments as ``norms.py`` (a module of
``torchfuse``: ``codegen.triton.ALL_TRUE_MASKS=False``). A row count that the heuristics' row
block divides (512) gives the per-thread program of larger shapes with the same row length; a
partial last block keeps its masks (511 rows: more instructions). Kernels are labelled with the
graph they ran in: ``inference`` (the forward under ``torch.no_grad()``), ``training`` (the
forward of the training graph) and ``backward``.
"""
from __future__ import annotations

import argparse
import collections
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_PTR = {torch.bfloat16: "*bf16", torch.float16: "*fp16", torch.float32: "*fp32", torch.float64: "*fp64",
        torch.int64: "*i64", torch.int32: "*i32", torch.int16: "*i16", torch.int8: "*i8", torch.uint8: "*u8",
        torch.bool: "*i1"}


#: the graph that launches now belong to (``inference``, ``training``, ``backward``)
PHASE = ["inference"]


def _record(launches: list):
    """Wrap ``Kernel.launch`` so that every launch appends ``(phase, kernel, stage, args,
    XBLOCK, RBLOCK, num_warps, fp_fusion)`` to ``launches`` (``PHASE``)."""
    import inspect

    from torchfuse.runtime import compile as rc

    original = getattr(rc.Kernel.launch, "unrecorded", rc.Kernel.launch)  # one wrapper, not one a case
    signature = inspect.signature(original)

    def launch(self, stage, grid, args, XBLOCK, RBLOCK, num_warps, *rest, **kw):
        bound = signature.bind(self, stage, grid, args, XBLOCK, RBLOCK, num_warps, *rest, **kw)
        bound.apply_defaults()
        launches.append((PHASE[0], self, stage, list(args), XBLOCK, RBLOCK, num_warps,
                         bound.arguments["fp_fusion"]))
        return original(self, stage, grid, args, XBLOCK, RBLOCK, num_warps, *rest, **kw)

    launch.unrecorded = original
    rc.Kernel.launch = launch


def spec_of(kernel, stage: int, args, XBLOCK: int, RBLOCK: int, num_warps: int, fp_fusion: bool = True) -> dict:
    """What Triton's JIT compiles for this launch, as JSON data: the source, the stage's
    function, its signature and constant arguments (``XBLOCK``, ``RBLOCK``, integers equal to
    1), the arguments Triton's JIT assumes 16-byte aligned or divisible by 16, the warps, and
    whether a multiply and an add may contract into one fused multiply-add (torchfuse launches
    with that off unless ``exact_rounding=False``).

    Raises:
        TypeError: an argument of a kind Triton does not take.
    """
    names = re.search(rf"def {kernel.source.stages[stage]}\((.*?)\):", kernel.source.text).group(1)
    names = [n.split(":")[0].strip() for n in names.split(",")]
    nospec = {"seed"} if '@triton.jit(do_not_specialize=["seed"])' in kernel.source.text else set()
    signature, constexprs, divisible = {}, {"XBLOCK": XBLOCK, "RBLOCK": RBLOCK}, []
    for i, (name, a) in enumerate(zip(names, list(args) + [None] * (len(names) - len(args)))):
        if name in ("XBLOCK", "RBLOCK"):
            signature[name] = "constexpr"
        elif isinstance(a, torch.Tensor):
            signature[name] = _PTR[a.dtype]
            if a.data_ptr() % 16 == 0:
                divisible.append(i)
        elif isinstance(a, bool) or a is None:
            signature[name], constexprs[name] = "constexpr", a
        elif isinstance(a, int):
            if a == 1 and name not in nospec:
                signature[name], constexprs[name] = "constexpr", 1
            else:
                signature[name] = "i32" if -2**31 <= a < 2**31 else "i64"
                if a % 16 == 0 and name not in nospec:
                    divisible.append(i)
        elif isinstance(a, float):
            signature[name] = "fp32"
        else:
            raise TypeError(f"argument {name}: {type(a).__name__}")
    return {"text": kernel.source.text, "name": kernel.source.stages[stage], "signature": signature,
            "constexprs": constexprs, "divisible": divisible, "num_warps": num_warps, "fp_fusion": fp_fusion}


def compile_sm90(spec: dict, dump: str | None = None) -> tuple[int, int, collections.Counter]:
    """(SASS instructions, registers a thread, opcode counts) of ``spec`` (:func:`spec_of`)
    compiled for sm_90. Run in a process that has not run Triton's interpreter (it patches
    ``triton.language``). ``dump``: a path prefix to write the SASS (``.sass``) and Triton's
    GPU IR (``.ttgir``) to.

    Raises:
        subprocess.CalledProcessError: the disassembler failed.
    """
    import triton
    from triton.backends.compiler import GPUTarget

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(spec["text"])
    mod_spec = importlib.util.spec_from_file_location(f"sass_{abs(hash(spec['text']))}", fh.name)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    fn = getattr(mod, spec["name"])
    attrs = {(i,): [["tt.divisibility", 16]] for i in spec["divisible"]}
    src = triton.compiler.ASTSource(fn=fn, signature=spec["signature"], constexprs=spec["constexprs"], attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": spec["num_warps"], "enable_fp_fusion": spec.get("fp_fusion", True)})
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as fh:
        fh.write(compiled.asm["cubin"])
    sass = subprocess.run([os.path.join(tools, "nvdisasm"), "-c", fh.name], capture_output=True, text=True,
                          check=True).stdout
    usage = subprocess.run([os.path.join(tools, "cuobjdump"), "--dump-resource-usage", fh.name],
                           capture_output=True, text=True, check=True).stdout
    if dump:
        for ext, text in ((".sass", sass), (".ttgir", compiled.asm["ttgir"])):
            with open(dump + ext, "w") as fh:
                fh.write(text)
    ops = collections.Counter()
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", line)
        if m:
            ops[m.group(1)] += 1
    regs = re.search(r"REG:(\d+)", usage)
    return sum(ops.values()), int(regs.group(1)) if regs else -1, ops


def _compile_all(path: str, top: int, dump: str | None = None) -> int:
    """The ``--compile`` child: compile each spec of the JSON file ``path`` and print a line
    (with ``dump``, a folder: write each kernel's SASS and GPU IR there)."""
    with open(path) as fh:
        specs = json.load(fh)
    for label, spec in specs:
        prefix = None
        if dump:
            os.makedirs(dump, exist_ok=True)
            prefix = os.path.join(dump, re.sub(r"[^\w.-]+", "_", label).strip("_"))
        n, regs, opc = compile_sm90(spec, prefix)
        print(f"  {label}: {n} instructions, {regs} registers; "
              + ", ".join(f"{k} {v}" for k, v in opc.most_common(top)), flush=True)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default="cross_entropy")
    p.add_argument("--dtypes", default="bfloat16")
    p.add_argument("--shapes", default="512x4096", metavar="NxD[,NxD]")
    p.add_argument("--backward", action="store_true", help="also the training graph's backward kernels")
    p.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE")
    p.add_argument("--top", type=int, default=8, help="opcodes listed per kernel")
    p.add_argument("--dump", default=None, metavar="DIR", help="write each kernel's SASS and GPU IR to DIR")
    p.add_argument("--compile", default=None, help=argparse.SUPPRESS)  # the child process
    args = p.parse_args(argv)
    if args.compile:
        return _compile_all(args.compile, args.top, args.dump)
    if not os.environ.get("TORCHFUSE_INTERPRET"):
        p.error("run with TORCHFUSE_INTERPRET=1 (kernels run on CPU tensors under Triton's interpreter)")
    from conftest import use_gpu_launch_configs
    from norms import _Settings, cases, parse_settings

    _Settings(parse_settings(p, args.set)).__enter__()

    import torchfuse

    use_gpu_launch_configs(setattr, 132)
    try:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    except ValueError:
        p.error(f"--shapes takes NxD[,NxD], not {args.shapes!r}")
    if any(len(sh) != 2 for sh in shapes):
        p.error(f"--shapes takes NxD[,NxD], not {args.shapes!r}")
    ops = set(args.ops.split(","))
    known = {"layer_norm", "rms_norm", "softmax", "log_softmax", "cross_entropy", "batch_norm_cl"}
    if ops - known:
        p.error(f"unknown --ops {sorted(ops - known)}; choose from {sorted(known)}")
    for op, shape, dtype, fn, make_inputs, grad_idx, *_ in cases([getattr(torch, d) for d in args.dtypes.split(",")],
                                                                 ops, shapes, device="cpu"):
        if op not in ops:
            continue
        torch._dynamo.reset()
        launches: list = []
        _record(launches)
        inputs = make_inputs()
        f = torchfuse.compile(fn, dynamic=False)
        PHASE[0] = "inference"
        with torch.no_grad():
            f(*inputs)
        if args.backward:
            for i in grad_idx:
                inputs[i].requires_grad_(True)
            PHASE[0] = "training"
            out = f(*inputs)
            PHASE[0] = "backward"
            torch.autograd.grad(out, [inputs[i] for i in grad_idx], torch.randn_like(out))
        seen, specs = set(), []
        for phase, kernel, stage, a, xb, rb, w, fusion in launches:
            key = (phase, kernel.source.key, stage, xb, rb, w, fusion)
            if key not in seen:
                seen.add(key)
                specs.append((f"{phase}: {kernel.source.stages[stage]} (X{xb} R{rb} w{w})",
                              spec_of(kernel, stage, a, xb, rb, w, fusion)))
        print(f"{op} {'x'.join(map(str, shape))} {str(dtype).replace('torch.', '')}:", flush=True)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(specs, fh)
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        child = [sys.executable, os.path.abspath(__file__), "--compile", fh.name, "--top", str(args.top)]
        if args.dump:
            child += ["--dump", os.path.join(args.dump, f"{op}_{'x'.join(map(str, shape))}_{str(dtype)[6:]}")]
        subprocess.run(child, env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
