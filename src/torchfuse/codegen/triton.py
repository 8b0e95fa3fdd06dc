"""Triton source generation for one fusion group: the entry point of code generation.

Takes a :class:`~torchfuse.segment.FusionGroup`, the code-relevant layout of a call
(:class:`~torchfuse.schedulers.layout.KernelLayout`) and the name of the scheduler that
planned it; returns a :class:`KernelSource`: the text of a Python module holding the kernel
(one function per stage of the scheduler's launch), the helpers it calls, and the order of
its arguments.

The scheduler writes each kernel's body (its module in :mod:`torchfuse.schedulers`) through a
:class:`~torchfuse.codegen.writer.KernelWriter`, which holds what every kernel shares. Every
generated module is self-contained text (no pickles, no imports of torchfuse): it starts with
the helper library's text (:mod:`torchfuse.codegen.helpers`), so the kernel cache key, the hash
of the text, changes whenever anything the kernel runs changes. The cache stores it as is,
and ``TORCHFUSE_DUMP_DIR`` writes it out for reading.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re

from .. import schedulers
from ..config import Tuning
from ..ir.ops import REGISTRY, Unsupported  # noqa: F401  (Unsupported: what generation raises)
from ..schedulers.layout import KernelLayout
from . import helpers
from .writer import KernelWriter, index_values  # noqa: F401  (index_values: re-exported for the runtime)

#: The text every kernel module starts with, and the helpers only the kernels that call one of
#: them carry (:mod:`torchfuse.codegen.helpers`, read from its source).
HEADER = helpers.kernel_header()
HEADER_ON_DEMAND = helpers.helpers_on_demand()
RANDOM_ON_DEMAND = helpers.random_helpers_on_demand()


@dataclasses.dataclass(frozen=True)
class KernelSource:
    """A generated kernel.

    Attributes:
        name: the kernel function's name (also what profilers show).
        text: the module source.
        key: SHA-256 of ``text``: the kernel cache key (the source fixes everything the
            compiled code depends on, and nothing else).
        params: the kernels' runtime parameter names in order (constexprs excluded); every
            stage takes the same parameters.
        stages: the kernel functions to launch, in order.
    """

    name: str
    text: str
    key: str
    params: tuple[str, ...]
    stages: tuple[str, ...] = ()


def kernel_name(group) -> str:
    """``tf_red_<ops>`` or ``tf_pw_<ops>``: the kernel's name from its first five distinct
    pointwise and reduction ops."""
    ops = []
    for n in group.nodes:
        if REGISTRY[n.op].kind in ("pointwise", "reduction") and n.op not in ops:
            ops.append(n.op)
    kind = "red" if group.domain.reduced else "pw"
    return f"tf_{kind}_" + "_".join(ops[:5])


def has_random(group) -> bool:
    """The group draws random numbers (its kernels take a ``seed_ptr`` argument last: the
    address of an int64 seed in device memory)."""
    return any(REGISTRY[n.op].kind == "random" for n in group.nodes)


def generate(group, layout: KernelLayout, scheduler: str, exact_rounding: bool = True,
             tuning: Tuning = Tuning()) -> KernelSource:
    """Generate the Triton module for ``group`` under ``layout``.

    Args:
        group: the fusion group.
        layout: the code-relevant layout of the call (from ``schedulers.layout.analyze``).
        scheduler: the name of the scheduler (``LaunchConfig.scheduler``); a two-stage one
            writes two kernels, ``<name>_partial`` then ``<name>``.
        exact_rounding: round intermediates to their eager dtype (see ``Options``).
        tuning: the forms of code to write (``codegen`` section, and the sections of the
            schedulers whose kernel bodies read one).

    Raises:
        Unsupported: an op or dtype combination has no Triton emission; the group runs
            through ATen instead.
        KeyError: no scheduler has the name ``scheduler``.
    """
    sched = schedulers.by_name(scheduler)
    name = kernel_name(group)
    stages = (name + "_partial", name) if sched.stages == 2 else (name,)
    writers = [KernelWriter(group, layout, reduce=sched.reduces, stage=k, stages=sched.stages,
                            exact_rounding=exact_rounding, tuning=tuning) for k in range(sched.stages)]
    kernels = []
    for k, (w, function) in enumerate(zip(writers, stages)):
        sched.write_body(w, k)
        kernels.append(w.function(function))
    body = "\n\n".join(kernels)
    called = [region for region, names in helpers.ON_DEMAND_REGIONS
              if any(re.search(rf"\b{h}\(", body) for h in names)]
    text = "\n\n".join([HEADER, *called, body])
    key = hashlib.sha256(text.encode()).hexdigest()
    return KernelSource(name=name, text=text, key=key, params=tuple(writers[0].params()), stages=stages)
