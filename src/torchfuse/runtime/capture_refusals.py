"""What a CUDA graph cannot capture, and how a refusal names the inputs it blames.

Takes an ATen-level FX graph (a forward, backward or inference graph whose nodes carry fake
values) and the indices of the inputs every replay reads in place; returns why the graph
cannot be captured, or ``None``: CPU tensors other than constant scalars, several devices, an
op that is not safe to capture (a host synchronization, a data-dependent size:
``torch._inductor.utils.get_first_incompatible_cudagraph_node``), an in-place write to an
input that is neither a parameter nor a buffer. A refused graph runs uncaptured and
``explain`` prints the reason (:mod:`torchfuse.runtime.training_graphs` for training graphs,
:mod:`torchfuse.runtime.cudagraphs` for inference).
"""
from __future__ import annotations

import re

import torch
import torch.fx


def capture_refusal(gm: torch.fx.GraphModule, static_inputs: list[int], names: tuple[str, ...] = (),
                    graph: str = "graph") -> str | None:
    """Why the ATen-level graph ``gm`` cannot be captured into a CUDA graph, or ``None``.

    Args:
        gm: the graph (nodes carry fake values in ``meta["val"]``).
        static_inputs: indices of the inputs read in place by every replay (parameters,
            buffers, a backward's saved activations); only these may be written in place.
        names: the user's names of ``gm``'s inputs (:func:`user_input_names`), where known.
        graph: what ``gm`` is (``"forward"``, ``"backward"``), to name an input's position.
    """
    from torch._dynamo.backends.cudagraphs import find_input_mutations
    from torch._inductor.utils import get_first_incompatible_cudagraph_node

    devices = set()
    constant = set()  # CPU scalars every call computes alike (see _cpu_constant)
    for node in gm.graph.nodes:
        tensors = _tensor_values(gm, node)
        cpu = [v for v in tensors if v.device.type == "cpu"]
        if cpu:
            if not _cpu_constant(gm, node, cpu, tensors, constant):
                what = f"input {describe_input(gm, node, names, graph)}" if node.op == "placeholder" else node.format_node()[:120]
                return (f"tensors on cpu ({what}; CUDA graphs capture CUDA work only, "
                        "and CPU scalars only when made from constants)")
            constant.add(node)
            continue
        devices.update(v.device for v in tensors)
        if tensors and not _reads_scalars_as_values(gm, node, constant):
            return (f"{node.format_node()[:120]} reads a CPU tensor on the device (a copy from host "
                    "memory, which a replay would repeat from memory that no longer holds it)")
    if any(d.type != "cuda" for d in devices):
        where = ", ".join(sorted(str(d) for d in devices if d.type != "cuda"))
        return f"tensors on {where} (CUDA graphs capture CUDA work only)"
    if len(devices) > 1:
        return f"tensors on several devices ({', '.join(sorted(str(d) for d in devices))})"
    if not devices:
        return "no CUDA tensors"
    node = get_first_incompatible_cudagraph_node(gm)
    if node is not None:
        return (f"{node.format_node()[:160]} cannot be captured (a host synchronization, a CPU op or a "
                "data-dependent size)")
    mutated = sorted(find_input_mutations(gm.graph) - set(static_inputs))
    if mutated:
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        return (f"input(s) {', '.join(describe_input(gm, placeholders[i], names, graph) for i in mutated)} written in place but neither a "
                "parameter nor a buffer (a replay writes its own copy)")
    return None


def describe_input(gm: torch.fx.GraphModule, placeholder: torch.fx.Node, names: tuple[str, ...] = (),
                   graph: str = "graph") -> str:
    """An input of ``gm`` as a refusal names it. With ``names``, the user's names of the
    forward's inputs (:func:`user_input_names`): in a forward or inference graph, one per
    placeholder; in a backward graph, the forward inputs it saves (AOTAutograd names them
    ``primals_k`` there too). Named so: the user's name, the dtype and shape, and AOTAutograd's
    name (``self.norm.running_mean (float32[8], primals_4)``). Otherwise AOTAutograd's name with
    the dtype, shape and position in ``graph`` (``tangents_1 (float32[8, 8], backward input 5
    of 6)``)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    val = placeholder.meta.get("val")
    what = f"{str(val.dtype).removeprefix('torch.')}{list(val.shape)}, " if isinstance(val, torch.Tensor) else ""
    k = placeholders.index(placeholder)
    if graph != "backward" and names and len(names) == len(placeholders):
        return f"{names[k]} ({what}{placeholder.name})"
    saved = re.fullmatch(r"primals_(\d+)", placeholder.name) if graph == "backward" else None
    if saved is not None and 0 < int(saved[1]) <= len(names):
        return f"{names[int(saved[1]) - 1]} ({what}{placeholder.name}, {graph} input {k + 1} of {len(placeholders)})"
    return f"{placeholder.name} ({what}{graph} input {k + 1} of {len(placeholders)})"


def user_input_names(gm: torch.fx.GraphModule) -> tuple[str, ...]:
    """The user's names of the inputs of TorchDynamo's graph ``gm``, in order, from the
    sources TorchDynamo records (``G['net']._modules['0']._parameters['weight']`` reads
    ``net[0].weight``, ``L['x']`` reads ``x``, a compiled module's own parameters read
    ``model.<path>``); AOTAutograd's forward and inference graphs take the same inputs in the
    same order. An input without a source keeps its node's name."""
    names = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        source = getattr(node.meta.get("grapharg"), "source", None)
        name = getattr(source, "name", None)
        try:
            name = name() if callable(name) else name
        except Exception:  # a source kind that cannot name itself
            name = None
        names.append(_readable(name) if isinstance(name, str) else node.name)
    return tuple(names)


def _readable(source: str) -> str:
    """``G['m']._modules['0']._parameters['weight']`` as Python reads it: ``m[0].weight``. A
    compiled module is TorchDynamo's local ``fn``, read as ``model``."""
    out = re.sub(r"^L\['fn'\](?=\._(?:modules|parameters|buffers)\[)", "model", source)
    out = re.sub(r"^[LG]\['([^']+)'\]", r"\1", out)
    out = re.sub(r"\._modules\['(\d+)'\]", r"[\1]", out)
    return re.sub(r"\._(?:modules|parameters|buffers)\['([^']+)'\]", r".\1", out)


def _tensor_values(gm: torch.fx.GraphModule, node: torch.fx.Node) -> list:
    """The tensors ``node`` defines: its traced values, or a constant's own tensor."""
    val = node.meta.get("val")
    if val is None and node.op == "get_attr":
        val = getattr(gm, str(node.target), None)
    return [v for v in (val if isinstance(val, (list, tuple)) else [val]) if isinstance(v, torch.Tensor)]


def _cpu_constant(gm: torch.fx.GraphModule, node: torch.fx.Node, cpu: list, tensors: list, constant: set) -> bool:
    """Whether the CPU tensors of ``node`` are scalars (or empty) that every call computes
    alike: a constant of the graph, or an op that is neither random nor in place on other such
    scalars only (an attention mask's ``scalar_tensor(-65504.0)``, a clamp bound). A CUDA op
    reads such a scalar's value on the host when it launches, so a capture keeps its value,
    which is the value of every later call; a CPU scalar computed from an input, a CPU tensor
    the graph returns, or one that a CPU op writes would be frozen wrongly, and is refused."""
    if len(cpu) != len(tensors) or any(v.numel() > 1 for v in cpu):
        return False
    if any(u.op == "output" for u in node.users):
        return False
    if node.op == "get_attr":
        return True
    if node.op != "call_function" or not all(a in constant for a in node.all_input_nodes):
        return False
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return not target._schema.is_mutable and torch.Tag.nondeterministic_seeded not in target.tags
    return False


#: device ops that take a CPU scalar's value on the host at launch (besides pointwise ops)
_SCALAR_READERS = frozenset({torch.ops.aten.fill.Tensor, torch.ops.aten.fill_.Tensor,
                             torch.ops.aten.masked_fill.Tensor, torch.ops.aten.masked_fill_.Tensor})


def _reads_scalars_as_values(gm: torch.fx.GraphModule, node: torch.fx.Node, constant: set) -> bool:
    """Whether the device op ``node`` reads the CPU scalars among its inputs as launch values
    (pointwise ops and fills: TensorIterator and ``fill_`` read a CPU scalar on the host), not
    by copying host memory to the device (``_to_copy``, indexing): a captured copy would read
    that host memory again at every replay. Empty CPU tensors have nothing to read."""
    scalars = [a for a in node.all_input_nodes if a in constant
               and any(v.numel() for v in _tensor_values(gm, a))]
    if not scalars:
        return True
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and (torch.Tag.pointwise in target.tags
                                                          or target in _SCALAR_READERS)
