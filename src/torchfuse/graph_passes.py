"""Rewrites of the captured TorchDynamo graph, before AOTAutograd traces it.

These passes work on the graph of PyTorch-level calls (``torch.nn.functional`` and tensor
methods) that TorchDynamo hands to the backend, where a library's choice of kernel can still
be influenced; after AOTAutograd's trace that choice is made.

* :func:`dense_attention_masks`: ``scaled_dot_product_attention`` runs on a fused GPU kernel
  (memory-efficient or cuDNN attention) only when its ``attn_mask`` has a unit stride in its
  last dimension (PyTorch's ``sdp_utils``: "GPU backends require attn_mask's last dimension to
  have stride 1"). Masks built by broadcasting a padding mask (HuggingFace transformers' masks
  under tracing, where their data-dependent "no padding" shortcut is skipped) have stride 0
  there, and PyTorch falls back to the math path: two batched matrix products, a softmax and
  their backward, the whole attention matrix written to memory. Measured on an H200 with
  BERT-base training: every layer's attention took the math path under ``torch.compile`` with
  any backend. The pass makes the last dimension dense while keeping broadcast leading
  dimensions broadcast (a ``B x 1 x S x S`` mask at most, never ``B x H x S x S``).

One pass works on the ATen-level graphs AOTAutograd produces, before they are analysed:

* :func:`merge_duplicate_pads`: the padded matrix products (``decompose.mm_padded``) pad an
  operand in its memory order, so the gradient of a language model's vocabulary product is
  padded once as ``G`` and once as ``permute(permute(G))``, which AOTAutograd's
  common-subexpression pass does not recognise as one value: two copies of a tensor of
  ``tokens x vocabulary`` elements per step (GPT-2 at 8 x 512 in bf16: 412 MB each).
"""
from __future__ import annotations

import logging

import torch
import torch.fx

log = logging.getLogger("torchfuse.fusion")

_SDPA_TARGETS = (torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention)


def calls_to(gm: torch.fx.GraphModule, targets) -> list[torch.fx.Node]:
    """The ``call_function`` nodes of ``gm`` whose target is one of ``targets``, in graph
    order, as a list (the passes insert nodes while they walk it)."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target in targets]


def finish(gm: torch.fx.GraphModule, done: int, what: str) -> int:
    """After a pass made ``done`` rewrites: check and regenerate ``gm``, log ``what``."""
    if done:
        gm.graph.lint()
        gm.recompile()
        log.info("%d %s", done, what)
    return done


def dense_last_dim(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` with the same values and shape, and a unit stride in its last dimension.

    Leading dimensions that were broadcast (stride 0) stay broadcast, so the copy made holds
    one element per distinct value of the last two (or fewer) varying dimensions.

    Args:
        mask: any tensor of at least one dimension (an attention mask, bool or float).

    Returns:
        A tensor equal to ``mask`` elementwise; a view of ``mask`` when its last stride is
        already 1.
    """
    if mask.dim() == 0 or mask.stride(-1) == 1 or mask.shape[-1] <= 1:
        return mask
    shape = mask.shape
    base = mask
    for d in range(mask.dim() - 1):
        if mask.stride(d) == 0 and mask.shape[d] != 1:
            base = base.narrow(d, 0, 1)
    return base.contiguous().expand(shape)


def dense_attention_masks(gm: torch.fx.GraphModule, devices: tuple[str, ...] = ("cuda",)) -> int:
    """Make every attention mask on ``devices`` whose last stride is 0 dense in that dimension.

    Args:
        gm: TorchDynamo's graph; nodes carry their fake example values in
            ``meta["example_value"]``.
        devices: device types whose fused attention kernels need the unit stride (PyTorch's
            CPU kernels accept any stride, so only CUDA by default).

    Returns:
        How many masks were rewritten (the graph is recompiled in place when any were).
    """
    done = 0
    for node in calls_to(gm, _SDPA_TARGETS):
        if "attn_mask" in node.kwargs:
            mask, where = node.kwargs["attn_mask"], "kw"
        elif len(node.args) > 3:
            mask, where = node.args[3], 3
        else:
            continue
        if not isinstance(mask, torch.fx.Node):
            continue
        value = mask.meta.get("example_value")
        if not isinstance(value, torch.Tensor) or value.device.type not in devices or value.dim() == 0:
            continue
        try:
            if not (value.stride(-1) == 0 and value.shape[-1] != 1):
                continue
        except Exception:  # a symbolic stride we cannot decide: leave the call as it is
            continue
        with gm.graph.inserting_before(node):
            dense = gm.graph.call_function(dense_last_dim, (mask,))
        dense.meta["example_value"] = dense_last_dim(value)
        if where == "kw":
            node.kwargs = {**node.kwargs, "attn_mask": dense}
        else:
            node.args = node.args[:3] + (dense,) + node.args[4:]
        done += 1
    return finish(gm, done, "attention mask(s) made dense in their last dimension for the fused GPU kernels")


_PERMUTES = (torch.ops.aten.permute.default, torch.ops.aten.t.default)


def _through_permutes(node: torch.fx.Node) -> tuple[torch.fx.Node, tuple[int, ...] | None]:
    """``(base, perm)`` with ``node`` equal to ``base.permute(perm)`` through a chain of
    ``aten.permute`` calls; ``perm`` is ``None`` when the chain composes to the identity."""
    perm = None
    while node.op == "call_function" and node.target in _PERMUTES:
        p = list(node.args[1]) if node.target is torch.ops.aten.permute.default else [1, 0]
        perm = p if perm is None else [p[i] for i in perm]
        node = node.args[0]
    if perm is not None and perm == list(range(len(perm))):
        perm = None
    return node, (tuple(perm) if perm is not None else None)


def merge_duplicate_pads(gm: torch.fx.GraphModule) -> int:
    """Replace each ``aten.constant_pad_nd`` whose input is, through permutes, the same view
    of the same tensor as an earlier pad's with the same padding and value by that earlier
    pad. Returns the number of pads removed."""
    seen: dict = {}
    done = 0
    for n in calls_to(gm, (torch.ops.aten.constant_pad_nd.default,)):
        src, perm = _through_permutes(n.args[0])
        value = n.args[2] if len(n.args) > 2 else n.kwargs.get("value", 0)
        key = (src, perm, tuple(n.args[1]), float(value))
        first = seen.setdefault(key, n)
        if first is n:
            continue
        n.replace_all_uses_with(first)
        chain = n.args[0]
        gm.graph.erase_node(n)
        while isinstance(chain, torch.fx.Node) and not chain.users and chain.target in _PERMUTES:
            up = chain.args[0]
            gm.graph.erase_node(chain)
            chain = up
        done += 1
    return finish(gm, done, "duplicate pads merged")
