"""Reproducers: a standalone script that rebuilds a graph torchfuse failed on, and runs it.

Takes an ATen-level FX graph (as AOTAutograd hands it to
:func:`torchfuse.backend.compile_graph`) and its example inputs; writes a Python file that

* defines the graph as printed by ``GraphModule.print_readable`` (with sizes, strides and
  devices in the annotations, and the user's source line above each op),
* makes random inputs with the recorded sizes, strides, dtypes and devices (symbolic sizes
  take the values they were traced with; module constants of up to 4096 elements keep their
  values, larger ones are random),
* runs the graph through torchfuse's stages (IR, segmentation, launch) with torchfuse's
  fallback warnings turned into errors, so the failure raises with its message, and compares
  the result with eager.

The script exits 0 after printing ``no failure reproduced`` when everything compiles and
matches eager, and with a traceback otherwise. Writing never raises: a reproducer that
cannot be written is logged and ``None`` returned, since it must not break the user's
program (the compiler has already decided to run the graph unfused).

Where: ``<dump_dir>/reproducers/`` with ``Options.dump_dir``, else
``<temporary directory>/torchfuse-reproducers/``.
"""
from __future__ import annotations

import logging
import os
import re
import tempfile
from typing import Any

import torch

log = logging.getLogger("torchfuse.fusion")

#: module constants up to this many elements are written with their values
_MAX_CONSTANT_VALUES = 4096


def _hint(x: Any) -> Any:
    """A concrete number for a traced size (a ``SymInt`` becomes the value it was traced with)."""
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        node = x.node
        if node.hint is not None:
            return node.hint
        env = node.shape_env
        # ``optimization_hint`` where PyTorch has it: ``size_hint`` warns there (a
        # FutureWarning the program would see for every graph taking an unbacked size)
        hint = getattr(env, "optimization_hint", None)
        try:
            return int(hint(node.expr, fallback=8) if hint is not None else env.size_hint(node.expr))
        except Exception:  # unbacked: no value known; any size will do for a reproducer
            return 8
    return x


def input_spec(x: Any) -> tuple:
    """``("tensor", shape, stride, dtype, device)`` for a tensor, ``("value", number)`` else.

    Sizes and strides are plain ints (symbolic ones at their traced values); dtype and
    device are strings (``"float32"``, ``"cuda:0"``).
    """
    if isinstance(x, torch.Tensor):
        shape = tuple(int(_hint(s)) for s in x.shape)
        stride = tuple(int(_hint(s)) for s in x.stride())
        return ("tensor", shape, stride, str(x.dtype).replace("torch.", ""), str(x.device))
    return ("value", _hint(x))


def _constant_spec(t: Any) -> tuple:
    if not isinstance(t, torch.Tensor):
        return ("value", t)
    dtype = str(t.dtype).replace("torch.", "")
    if t.numel() <= _MAX_CONSTANT_VALUES and not t.is_complex():
        return ("values", t.detach().cpu().reshape(-1).tolist(), tuple(t.shape), dtype, str(t.device))
    return ("tensor", tuple(t.shape), tuple(t.stride()), dtype, str(t.device))


def _constants(gm: torch.fx.GraphModule) -> dict[str, tuple]:
    found = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            obj = gm
            for part in str(node.target).split("."):
                obj = getattr(obj, part)
            if not isinstance(obj, torch.nn.Module):
                found[str(node.target)] = _constant_spec(obj)
    return found


def reproducer_text(gm: torch.fx.GraphModule, inputs: list[tuple], name: str, error: str) -> str:
    """The reproducer script for ``gm`` with inputs described by :func:`input_spec`."""
    import torchfuse

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    code = gm.print_readable(print_output=False, include_stride=True, include_device=True)
    # the printed class is named after the module's class, which may not be an identifier (<lambda>)
    code = re.sub(r"^class [^\n(]*\(torch\.nn\.Module\):", "class GraphModule(torch.nn.Module):", code.lstrip(), count=1)
    first_line = error.strip().splitlines()[0] if error.strip() else "unknown error"
    header = (
        f'"""torchfuse reproducer: the {name} graph failed ({first_line[:200]}).\n\n'
        f"Run it with `python <this file> [--device cpu|cuda] [--seed N]` (CPU tensors run the\n"
        f"generated kernels through Triton's interpreter). It rebuilds the captured ATen graph, makes\n"
        f"random inputs with the recorded sizes, strides and dtypes, runs the graph through torchfuse\n"
        f"(a fallback warning raises) and compares with eager. Written by torchfuse\n"
        f"{torchfuse.__version__} with torch {torch.__version__} and triton {triton_version}.\n\n"
        f"The error, in full:\n\n" + _indent(error.replace('"""', "'''"), 4) + '\n"""\n'
    )
    return header + _TEMPLATE.format(name=repr(name), inputs=_pretty(inputs), constants=_pretty(_constants(gm)),
                                      graph=code.rstrip() + "\n")


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line if line else line for line in text.splitlines())


def _pretty(obj: Any) -> str:
    if isinstance(obj, list):
        return "[\n" + "".join(f"    {x!r},\n" for x in obj) + "]"
    if isinstance(obj, dict):
        return "{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in obj.items()) + "}"
    return repr(obj)


def reproducer_dir(options) -> str:
    """Where reproducers go: ``<dump_dir>/reproducers`` or the temporary directory's
    ``torchfuse-reproducers``."""
    root = getattr(options, "dump_dir", None)
    return os.path.join(root, "reproducers") if root else os.path.join(tempfile.gettempdir(), "torchfuse-reproducers")


def write_reproducer(gm: torch.fx.GraphModule, example_inputs: list, name: str, error: str | BaseException,
                     options=None) -> str | None:
    """Write a reproducer for ``gm`` and return its path, or ``None`` when that fails.

    Args:
        gm: the ATen-level FX graph compile_graph received.
        example_inputs: its (fake) example inputs, or :func:`input_spec` tuples.
        name: the graph's name (``forward``, ``backward``, ``inference``).
        error: what failed (an exception, or its message).
        options: the :class:`~torchfuse.config.Options` in use (for ``dump_dir``).
    """
    if isinstance(error, BaseException):
        error = f"{type(error).__name__}: {error}"
    try:
        specs = [x if isinstance(x, tuple) else input_spec(x) for x in example_inputs]
        text = reproducer_text(gm, specs, name, error)
        folder = reproducer_dir(options)
        os.makedirs(folder, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix=f"repro_{name}_", suffix=".py", dir=folder)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return path
    except Exception as e:  # a reproducer must never break the user's program
        log.warning("could not write a reproducer for the %s graph: %s: %s", name, type(e).__name__, e)
        return None


class ReproducerWriter:
    """Writes a reproducer of one graph when asked (a fusion group of it failed).

    Input metadata is read at construction, so no fake tensor is kept alive; the graph module
    is kept (the compiled graph holds it anyway).

    Call it with the failure message; returns the file's path or ``None``.
    """

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: list, name: str, options=None):
        self.gm = gm
        self.inputs = [input_spec(x) for x in example_inputs]
        self.name = name
        self.options = options
        self.written: str | None = None

    def __call__(self, error: str | BaseException) -> str | None:
        if self.written is None:  # one file per graph, however many of its groups fail
            self.written = write_reproducer(self.gm, self.inputs, self.name, error, self.options)
        return self.written


_TEMPLATE = '''import argparse
import warnings

import torch
from torch import device, inf, nan  # noqa: F401  (names the printed graph uses)

NAME = {name}

#: per graph input: ("tensor", shape, stride, dtype, device) or ("value", number)
INPUTS = {inputs}

#: module constants: ("values", flat values, shape, dtype, device) or ("tensor", shape, stride, dtype, device)
CONSTANTS = {constants}


{graph}

def random_tensor(shape, stride, dtype, dev, generator):
    """A tensor of these sizes and strides (overlapping ones included) with random values."""
    dtype = getattr(torch, dtype)
    extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(s > 0 for s in shape) else 0
    if dtype.is_floating_point or dtype.is_complex:
        flat = torch.randn(extent, generator=generator).to(dtype)
    elif dtype == torch.bool:
        flat = torch.randint(0, 2, (extent,), generator=generator).bool()
    else:  # small non-negative ints: safe as indices of any non-empty dim
        flat = torch.randint(0, 2, (extent,), generator=generator).to(dtype)
    return flat.to(dev).as_strided(shape, stride)


def pick_device(recorded, wanted):
    if wanted:
        return torch.device(wanted)
    if recorded.startswith("cuda") and not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device(recorded)


def make_inputs(wanted_device, seed):
    generator = torch.Generator().manual_seed(seed)
    out = []
    for spec in INPUTS:
        if spec[0] == "tensor":
            _, shape, stride, dtype, dev = spec
            out.append(random_tensor(shape, stride, dtype, pick_device(dev, wanted_device), generator))
        else:
            out.append(spec[1])
    return out


def make_module(wanted_device, seed):
    module = GraphModule()
    generator = torch.Generator().manual_seed(seed + 1)
    for name, spec in CONSTANTS.items():
        if spec[0] == "values":
            _, values, shape, dtype, dev = spec
            value = torch.tensor(values, dtype=getattr(torch, dtype)).reshape(shape).to(pick_device(dev, wanted_device))
        elif spec[0] == "tensor":
            _, shape, stride, dtype, dev = spec
            value = random_tensor(shape, stride, dtype, pick_device(dev, wanted_device), generator)
        else:
            value = spec[1]
        setattr(module, name, value)
    return module


def main(argv=None):
    parser = argparse.ArgumentParser(description="torchfuse reproducer for the " + NAME + " graph")
    parser.add_argument("--device", default=None, help="run on this device instead of the recorded one")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    from torchfuse.backend import resolve_options
    from torchfuse.ir.from_fx import graph_from_fx
    from torchfuse.runtime.executor import CompiledGraph
    from torchfuse.segment import segment

    inputs = make_inputs(args.device, args.seed)
    gm = torch.fx.symbolic_trace(make_module(args.device, args.seed))
    FakeTensorProp(gm).propagate(*inputs)
    on_cpu = any(isinstance(x, torch.Tensor) and x.device.type == "cpu" for x in inputs)
    options = resolve_options(interpret=True) if on_cpu else resolve_options()
    expected = gm(*inputs)
    graph = graph_from_fx(gm, options)
    seg = segment(graph, options)
    print(seg)
    compiled = CompiledGraph(seg, options, name=NAME)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="torchfuse", category=RuntimeWarning)
        got = compiled(list(inputs))
    exact = float64_outputs(gm, inputs)
    for i, (g, e) in enumerate(zip(got, expected)):
        if isinstance(e, torch.Tensor):
            check_output(i, g, e, exact[i] if exact is not None else None)
    print(f"no failure reproduced: {{len(seg.groups)}} fusion groups ran and matched eager")


def float64_outputs(gm, inputs):
    """The graph's outputs with its floating-point inputs in float64 (``None`` when it cannot run
    so): the reference that tells rounding apart from a wrong value."""
    wide = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    try:
        return gm(*wide)
    except Exception:  # noqa: BLE001 (an op without float64: compare with eager alone)
        return None


def check_output(i, got, eager, exact):
    """Raise when output ``i`` differs from eager beyond rounding: exactly for integers and
    booleans; for floats against the float64 reference as torchfuse's model tests judge (after
    ``torch._dynamo.utils.same``): the largest error at most 3x eager's, or the root-mean-square
    error at most 2x eager's with the largest within 5x, both plus 1e-5 of the result's scale
    (summation orders differ between kernels and ATen); NaN where eager has NaN. With no
    reference, ``torch.testing.assert_close``'s tolerance."""
    if not eager.is_floating_point() or not isinstance(exact, torch.Tensor):
        torch.testing.assert_close(got, eager, equal_nan=True, msg=lambda m: f"output {{i}}: {{m}}")
        return
    assert got.shape == eager.shape and got.dtype == eager.dtype, (i, got.shape, eager.shape, got.dtype, eager.dtype)
    if not torch.equal(got.isnan(), eager.isnan()):
        raise AssertionError(f"output {{i}}: NaN at other positions than eager's")
    keep = ~eager.isnan()
    ref = exact.double()[keep]
    err, eager_err = (got.double()[keep] - ref).abs(), (eager.double()[keep] - ref).abs()
    if not err.numel():
        return
    tol = 1e-5 * ref.abs().max().item() + 1e-6
    worst, eager_worst = err.max().item(), eager_err.max().item()
    rms, eager_rms = err.square().mean().sqrt().item(), eager_err.square().mean().sqrt().item()
    if not (worst <= 3 * eager_worst + tol or (rms <= 2 * eager_rms + tol and worst <= 5 * eager_worst + tol)):
        raise AssertionError(f"output {{i}}: error against float64 {{worst:.3g}} (largest), {{rms:.3g}} (rms); "
                             f"eager's {{eager_worst:.3g}}, {{eager_rms:.3g}}")

if __name__ == "__main__":
    main()
'''
