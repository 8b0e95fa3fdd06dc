"""The compiler's passes, in the order they run, at the three levels of graph it works on.

A program captured by ``torch.compile`` goes through, in order:

1. **FX level** (:data:`FX_PASSES`, on TorchDynamo's graph of PyTorch-level calls, once per
   capture): attention masks made dense, ``linear`` calls of one input made one matrix
   product (:mod:`torchfuse.passes.fx`); for frozen inference
   graphs BatchNorm folding and convolution biases moved out; channels-last convolutions
   (:mod:`torchfuse.freezing`).
2. **AOTAutograd** (PyTorch's): functionalization, decomposition with
   :func:`torchfuse.decompose.decomposition_table`, the joint forward-backward trace and the
   min-cut partitioner, kept from recomputing what the forward computes from an input it
   writes (:func:`torchfuse.passes.joint.partition`); each resulting graph (``forward``,
   ``backward`` or ``inference``) goes on separately.
3. **ATen level** (per graph): :data:`ATEN_PASSES_BEFORE_FREEZING` (cuDNN's fused
   convolution epilogues, before the frozen weights' subgraph is split off,
   :func:`torchfuse.freezing.split_weight_subgraph`), then :data:`ATEN_PASSES` (duplicate pads
   merged, concatenations of one non-empty tensor as copies, CPU constants copied into device
   tensors read from device fills, a backward's gradients that view one tensor given their
   own, cross-entropy's row sums;
   :mod:`torchfuse.passes.aten`,
   :mod:`torchfuse.passes.cross_entropy`).
4. **IR level** (:data:`IR_PASSES`): the IR built from the ATen graph
   (:func:`torchfuse.ir.from_fx.graph_from_fx`), then the segmenter's passes
   (:func:`torchfuse.segment.segment`) into fusion groups and ATen calls; at a group's first
   call its scheduler's heuristic, the code writer and the kernel cache
   (:mod:`torchfuse.runtime.group`).

Each pass is a :class:`GraphPass`: a name (``explain`` lists the rewrites by it), a function of
the graph and the :class:`~torchfuse.config.Options`, and when it applies. The backend
(:mod:`torchfuse.backend`) calls :func:`run_fx_passes` and :func:`run_aten_passes`, then
builds the IR and segments it; nothing else decides which graph pass runs.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Callable

import torch.fx

from . import freezing
from .config import Options
from .passes import aten, concat, cross_entropy, fx

# The passes are looked up in their modules when they run (``module.function``), so that a test
# can wrap one to watch what it did.


@dataclasses.dataclass(frozen=True)
class PassContext:
    """What decides whether a pass applies to a graph.

    Attributes:
        options: the compile's options.
        graph: ``"captured"`` (TorchDynamo's graph) or AOTAutograd's graph name (``"forward"``,
            ``"backward"``, ``"inference"``, or another name for a graph compiled on its own).
        grad_enabled: whether gradients were enabled at capture (TorchDynamo guards on it).
    """

    options: Options
    graph: str
    grad_enabled: bool = True

    @property
    def frozen(self) -> bool:
        """Weights are treated as constants: ``Options.freeze`` under ``torch.no_grad()``."""
        return self.options.freeze and not self.grad_enabled


@dataclasses.dataclass(frozen=True)
class GraphPass:
    """One rewrite of an FX graph.

    Attributes:
        name: the name ``explain`` counts its rewrites under.
        run: ``(graph module, options) -> rewrites made``; changes the graph in place.
        applies: ``(context) -> bool``.
        guarded: a failure warns and the graph is compiled without the rest of the pass (its
            finished rewrites are whole); ``False``: the failure is the graph's (it runs
            unfused, :func:`torchfuse.backend.compile_graph`), and its rewrites are not counted.
    """

    name: str
    run: Callable[[torch.fx.GraphModule, Options], int]
    applies: Callable[[PassContext], bool]
    guarded: bool = True


def _always(context: PassContext) -> bool:
    return True


def _channels_last(context: PassContext) -> bool:
    o = context.options
    return (context.frozen or (o.channels_last_training and context.grad_enabled)
            or (o.channels_last_inference and o.cudagraphs and not context.grad_enabled))


def _weights_cost_nothing_to_concatenate(context: PassContext) -> bool:
    """Training graphs (the weights' concatenation fuses with autocast's cast of them, and the
    step's activations outweigh it) and frozen graphs (it is computed once): not unfrozen
    inference, where a call with few rows (a decoder's step) would copy every grouped weight."""
    return context.grad_enabled or context.frozen


FX_PASSES: tuple[GraphPass, ...] = (
    GraphPass("dense_attention_masks",
              lambda gm, o: fx.dense_attention_masks(gm, o.tuning.graph_passes.attention_mask_devices), _always),
    GraphPass("linear_interpolations", lambda gm, o: fx.linear_interpolations(gm), _always),
    GraphPass("grouped_linears",
              lambda gm, o: fx.grouped_linears(gm, o.tuning.graph_passes.linear_group_devices,
                                               o.tuning.graph_passes.linear_group_max_members),
              _weights_cost_nothing_to_concatenate),
    GraphPass("fold_conv_batchnorm", lambda gm, o: freezing.fold_conv_batchnorm(gm), lambda c: c.frozen),
    GraphPass("conv_bias_epilogues",
              lambda gm, o: freezing.conv_bias_epilogues(gm, o.tuning.graph_passes.conv_bias_epilogue_devices),
              lambda c: c.frozen),
    GraphPass("channels_last_convolutions",
              lambda gm, o: freezing.channels_last_convolutions(gm, o.tuning.graph_passes.channels_last_devices),
              _channels_last),
)

ATEN_PASSES_BEFORE_FREEZING: tuple[GraphPass, ...] = (
    # before the weights' subgraph is split off, so that the summed biases of a frozen graph are hoisted
    GraphPass("conv_relu_epilogues", lambda gm, o: aten.conv_relu_epilogues(gm, o.tuning.graph_passes),
              lambda c: c.graph == "inference" and c.options.conv_epilogues),
)

ATEN_PASSES: tuple[GraphPass, ...] = (
    # unguarded: kernels read memory, not ATen's negative bit
    GraphPass("resolved_negative_views", lambda gm, o: aten.resolved_negative_views(gm), _always,
              guarded=False),
    GraphPass("merge_duplicate_pads", lambda gm, o: aten.merge_duplicate_pads(gm), _always, guarded=False),
    GraphPass("cat_of_one", lambda gm, o: concat.cat_of_one(gm), _always),
    GraphPass("summed_scatters_as_cat", lambda gm, o: concat.summed_scatters_as_cat(gm), _always),
    GraphPass("views_of_pointwise_values", lambda gm, o: concat.views_of_pointwise_values(gm), _always),
    GraphPass("equal_cats_as_selects",
              lambda gm, o: concat.equal_cats_as_selects(gm, o.tuning.graph_passes.cat_select_max_inputs), _always),
    GraphPass("scalar_copies_from_device", lambda gm, o: aten.scalar_copies_from_device(gm), _always),
    # unguarded: a gradient left a view of another's storage would be wrong for CUDA graphs
    GraphPass("separate_gradient_views", lambda gm, o: aten.separate_gradient_views(gm),
              lambda c: c.graph == "backward", guarded=False),
    GraphPass("lifted_scalar_constants", lambda gm, o: aten.lifted_scalar_constants(gm), _always),
    # log_softmax_sums first: a log-softmax it no longer reads lets one_hot_picks reach x - max
    GraphPass("log_softmax_sums",
              lambda gm, o: cross_entropy.log_softmax_sums(gm, o.persistent_max_elements, o.tuning.graph_passes),
              lambda c: c.options.cross_entropy_rewrites),
    GraphPass("one_hot_picks",
              lambda gm, o: cross_entropy.one_hot_picks(gm, o.persistent_max_elements, o.tuning.graph_passes),
              lambda c: c.options.cross_entropy_rewrites),
)

#: the IR-level passes, for the reader: the backend runs the IR's construction and the
#: segmenter's passes when a graph is compiled, the runtime the rest at a group's first call
IR_PASSES: tuple[str, ...] = (
    "ir.from_fx.graph_from_fx", "segment.rewrites", "segment.fuse.partition", "segment.remat.rematerialize",
    "segment.steps.finalize", "schedulers (heuristic per group)", "codegen (Triton source)",
    "runtime.compile (kernel cache)",
)


def run_passes(passes: tuple[GraphPass, ...], gm: torch.fx.GraphModule, context: PassContext,
               counts: dict[str, int]) -> None:
    """Run each of ``passes`` that applies in ``context`` on ``gm``, in order, adding the
    rewrites of each guarded one to ``counts`` under its name.

    Raises:
        Exception: what an unguarded pass raised (a guarded one warns instead).
    """
    for graph_pass in passes:
        if not graph_pass.applies(context):
            continue
        if not graph_pass.guarded:
            graph_pass.run(gm, context.options)
            continue
        try:
            done = graph_pass.run(gm, context.options)
        except Exception as e:  # must not stop the program; the rewrites it finished stay
            gm.recompile()
            warnings.warn(f"torchfuse: graph pass {graph_pass.name} failed ({type(e).__name__}: {e}); "
                          "continuing without it", RuntimeWarning, stacklevel=3)
            continue
        if done:
            counts[graph_pass.name] = counts.get(graph_pass.name, 0) + done


def run_fx_passes(gm: torch.fx.GraphModule, options: Options, grad_enabled: bool, counts: dict[str, int]) -> None:
    """:data:`FX_PASSES` on TorchDynamo's graph ``gm`` (see :func:`run_passes`)."""
    run_passes(FX_PASSES, gm, PassContext(options, "captured", grad_enabled), counts)


def run_aten_passes(gm: torch.fx.GraphModule, options: Options, name: str, counts: dict[str, int],
                    before_freezing: bool = False) -> None:
    """:data:`ATEN_PASSES` (or, with ``before_freezing``, :data:`ATEN_PASSES_BEFORE_FREEZING`)
    on AOTAutograd's graph ``gm`` named ``name`` (see :func:`run_passes`)."""
    passes = ATEN_PASSES_BEFORE_FREEZING if before_freezing else ATEN_PASSES
    run_passes(passes, gm, PassContext(options, name), counts)


def describe() -> str:
    """The passes in the order they run, one line each."""
    lines = ["FX level (TorchDynamo's graph):"]
    lines += [f"  {p.name}" for p in FX_PASSES]
    lines += ["AOTAutograd: functionalize, decompose, trace the joint graph, partition (min-cut)",
              "ATen level (each forward, backward or inference graph):"]
    lines += [f"  {p.name}" for p in ATEN_PASSES_BEFORE_FREEZING + ATEN_PASSES]
    lines += ["IR level:"] + [f"  {name}" for name in IR_PASSES]
    return "\n".join(lines)
