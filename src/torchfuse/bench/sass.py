"""``torchfuse bench sass``: instructions and registers of torchfuse's kernels compiled for an
H200 (sm_90), on a machine without a GPU.

Memory-bound kernels over 16-bit rows can be bound by instruction issue instead: a bf16
cross-entropy forward row kernel at 4096 elements a row ran at 41% of a device copy on an H200
while its fp32 form, with twice the bytes and fewer instructions, ran at 70%. This runs the
cases of ``torchfuse bench norms`` on CPU tensors under Triton's interpreter with the launch
configurations the heuristics pick on a GPU of 132 multiprocessors
(``Options.launch_configs_for_sm_count``), records every kernel launch (source,
stage, argument types, XBLOCK, RBLOCK, warps), compiles each for sm_90 with Triton's
ahead-of-time compiler (no device needed) with the specializations Triton's JIT would make for
those arguments (16-byte aligned pointers, integers divisible by 16, integers equal to 1) and
the launch's multiply-add contraction setting (off under torchfuse's default exact rounding),
and disassembles the binary with the ``nvdisasm`` and ``cuobjdump`` that come with Triton (in a
child process: the interpreter patches ``triton.language``). Per kernel it prints and records
as a row (``extra``: ``instructions``, ``registers``, ``opcodes``, ``kernel``) the SASS
instructions of one thread's program (straight line for a persistent kernel; a loop body counts
once), the registers a thread, and the most frequent opcodes.

Counts are of the binary Triton's version here builds (the GPU machine may run another
Triton), so compare variants with each other, not with another machine's numbers.

::

    python -m torchfuse.bench sass --ops cross_entropy --shapes 512x4096 --dtypes bfloat16 \\
        [--backward] [--set codegen.flush_summed_exp=False]

``--set`` takes the overrides of :mod:`torchfuse.bench.variants`. A row count that the
heuristics' row block divides (512) gives the per-thread program of larger shapes with the same
row length; a partial last block keeps its masks (511 rows: more instructions). Kernels are
labelled with the graph they ran in: ``inference`` (the forward under ``torch.no_grad()``),
``training`` (the forward of the training graph) and ``backward``.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

import torch

from .rows import add_row_arguments, provenance, save_rows

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

    from ..runtime.compile import triton_options

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(spec["text"])
    mod_spec = importlib.util.spec_from_file_location(f"sass_{abs(hash(spec['text']))}", fh.name)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    fn = getattr(mod, spec["name"])
    attrs = {(i,): [["tt.divisibility", 16]] for i in spec["divisible"]}
    src = triton.compiler.ASTSource(fn=fn, signature=spec["signature"], constexprs=spec["constexprs"], attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": spec["num_warps"], **triton_options(spec.get("fp_fusion", True))})
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
    """The ``--compile`` child: compile each spec of the JSON file ``path``, print a line each
    (with ``dump``, a folder: write each kernel's SASS and GPU IR there), and write
    ``[label, instructions, registers, {opcode: count}]`` of each to ``path + ".out"``."""
    with open(path) as fh:
        specs = json.load(fh)
    results = []
    for label, spec in specs:
        prefix = None
        if dump:
            os.makedirs(dump, exist_ok=True)
            prefix = os.path.join(dump, re.sub(r"[^\w.-]+", "_", label).strip("_"))
        n, regs, opc = compile_sm90(spec, prefix)
        results.append([label, n, regs, dict(opc.most_common(top))])
        print(f"  {label}: {n} instructions, {regs} registers; "
              + ", ".join(f"{k} {v}" for k, v in opc.most_common(top)), flush=True)
    with open(path + ".out", "w") as fh:
        json.dump(results, fh)
    return 0


def main(argv: list[str] | None = None) -> int:
    from .norms import OPS, PRECISION, cases
    from .variants import options_with, parse_overrides

    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="torchfuse bench sass", description=__doc__.splitlines()[0])
    p.add_argument("--ops", default="cross_entropy")
    p.add_argument("--dtypes", default="bfloat16")
    p.add_argument("--shapes", default="512x4096", metavar="NxD[,NxD]")
    p.add_argument("--backward", action="store_true", help="also the training graph's forward and backward kernels")
    p.add_argument("--set", action="append", default=[], metavar="OVERRIDE",
                   help="an override of torchfuse.bench.variants, e.g. codegen.flush_summed_exp=False")
    p.add_argument("--top", type=int, default=8, help="opcodes listed per kernel")
    p.add_argument("--sm", type=int, default=132, help="multiprocessors of the GPU whose launch configurations to use")
    p.add_argument("--dump", default=None, metavar="DIR", help="write each kernel's SASS and GPU IR to DIR")
    p.add_argument("--compile", default=None, help=argparse.SUPPRESS)  # the child process
    add_row_arguments(p)
    args = p.parse_args(argv)
    if args.compile:
        return _compile_all(args.compile, args.top, args.dump)
    try:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
        parse_overrides(args.set)
    except ValueError as e:
        p.error(f"--shapes takes NxD[,NxD]; --set takes overrides ({e})")
    if any(len(sh) != 2 for sh in shapes):
        p.error(f"--shapes takes NxD[,NxD], not {args.shapes!r}")
    ops = set(args.ops.split(","))
    if ops - set(OPS):
        p.error(f"unknown --ops {sorted(ops - set(OPS))}; choose from {sorted(OPS)}")
    import torchfuse

    options = options_with(args.set, interpret=True, launch_configs_for_sm_count=args.sm)
    prov = provenance(args.run_name, "cpu", argv, "sass")
    rows = []
    for case in cases([getattr(torch, d) for d in args.dtypes.split(",")], ops, shapes, device="cpu"):
        torch._dynamo.reset()
        launches: list = []
        _record(launches)
        inputs = case.make_inputs()
        f = torchfuse.compile(case.fn, dynamic=False, options=options)
        PHASE[0] = "inference"
        with torch.no_grad():
            f(*inputs)
        if args.backward:
            for i in case.grad_index:
                inputs[i].requires_grad_(True)
            PHASE[0] = "training"
            out = f(*inputs)
            PHASE[0] = "backward"
            torch.autograd.grad(out, [inputs[i] for i in case.grad_index], torch.randn_like(out))
        seen, specs, phases = set(), [], []
        for phase, kernel, stage, a, xb, rb, w, fusion in launches:
            key = (phase, kernel.source.key, stage, xb, rb, w, fusion)
            if key not in seen:
                seen.add(key)
                specs.append((f"{phase}: {kernel.source.stages[stage]} (X{xb} R{rb} w{w})",
                              spec_of(kernel, stage, a, xb, rb, w, fusion)))
                phases.append(phase)
        precision = PRECISION.get(case.dtype, str(case.dtype))
        print(f"{case.op} {'x'.join(map(str, case.shape))} {precision}:", flush=True)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(specs, fh)
        env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TORCHFUSE_INTERPRET")}
        child = [sys.executable, "-m", "torchfuse.bench", "sass", "--compile", fh.name, "--top", str(args.top)]
        if args.dump:
            child += ["--dump", os.path.join(args.dump, f"{case.op}_{'x'.join(map(str, case.shape))}_{precision}")]
        subprocess.run(child, env=env, check=True)
        with open(fh.name + ".out") as out_file:
            for phase, (label, n, regs, opcodes) in zip(phases, json.load(out_file)):
                rows.append(prov.row("sass", case.id, mode=phase, precision=precision, backend="torchfuse",
                                     variant=" ".join(args.set),
                                     extra={"kernel": label, "instructions": n, "registers": regs, "opcodes": opcodes,
                                            "sm": args.sm, **({"overrides": args.set} if args.set else {})}))
    save_rows(args, "cpu", rows)
    return 0
