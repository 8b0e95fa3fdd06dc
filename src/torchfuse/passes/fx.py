"""FX-level rewrites: the graph of PyTorch-level calls (``torch.nn.functional`` and tensor
methods) TorchDynamo hands to the backend, before AOTAutograd traces it, where a library's
choice of kernel can still be influenced.

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

The freezing passes (:mod:`torchfuse.freezing`) work at this level too;
:mod:`torchfuse.pipeline` lists them all in the order they run.
"""
from __future__ import annotations

import torch
import torch.fx

from . import calls_to, finish

_SDPA_TARGETS = (torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention)


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
