"""Rewrites of TorchDynamo's graph before AOTAutograd (:mod:`torchfuse.graph_passes`)."""
from __future__ import annotations

import pytest
import torch

from torchfuse.graph_passes import dense_attention_masks, dense_last_dim


@pytest.mark.parametrize("shape,expand", [((2, 1, 1, 8), (2, 1, 8, 8)), ((2, 1, 1, 8), (2, 3, 8, 8)),
                                          ((1, 8), (8, 8)), ((8,), (4, 8))])
def test_dense_last_dim_keeps_values_and_broadcast_dims(shape, expand):
    torch.manual_seed(0)
    mask = (torch.rand(shape) > 0.3).expand(expand)
    dense = dense_last_dim(mask)
    assert dense.shape == mask.shape and dense.stride(-1) == 1
    assert torch.equal(dense, mask)
    # broadcast leading dims stay broadcast: no copy per head
    for d in range(mask.dim() - 1):
        if mask.stride(d) == 0 and mask.shape[d] != 1:
            assert dense.stride(d) == 0


def test_dense_last_dim_leaves_dense_masks_alone():
    mask = torch.rand(2, 1, 8, 8) > 0.5
    assert dense_last_dim(mask) is mask


@pytest.mark.parametrize("as_kwarg", [True, False])
def test_attention_mask_rewritten_in_captured_graph(as_kwarg):
    """A padding mask broadcast over the key dimension (stride 0, as HuggingFace builds it under
    tracing) is made dense before attention; values equal eager's."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 8, 16) for _ in range(3))
    pad = torch.tensor([[True] * 8, [True] * 5 + [False] * 3])
    rewritten = []

    def backend(gm, inputs):
        rewritten.append(dense_attention_masks(gm, devices=("cpu",)))
        return gm

    def f(q, k, v, pad):
        mask = pad[:, None, None, :].expand(2, 1, 8, 8)
        mask = mask.transpose(-1, -2)  # key padding along the last dim's stride 0
        if as_kwarg:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, mask)

    torch._dynamo.reset()
    got = torch.compile(f, backend=backend, fullgraph=True)(q, k, v, pad)
    assert rewritten == [1]
    torch.testing.assert_close(got, f(q, k, v, pad))


def test_pads_of_one_tensor_seen_through_permutes_are_merged():
    """``pad(G)`` and ``pad(G.t().t())`` with the same padding are one copy (the padded
    products pad a gradient once per product otherwise); a pad of a different view, padding
    or value stays. Outputs equal the unmerged graph's."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchfuse.graph_passes import merge_duplicate_pads

    aten = torch.ops.aten

    def f(g):
        return (aten.constant_pad_nd(g, [0, 3]), aten.constant_pad_nd(g.t().t(), [0, 3]),
                aten.constant_pad_nd(g.t(), [0, 3]), aten.constant_pad_nd(g, [0, 3], 1.0),
                aten.constant_pad_nd(g, [0, 2]))

    g = torch.randn(4, 5)
    gm = make_fx(f)(g)
    want = gm(g)
    assert merge_duplicate_pads(gm) == 1
    pads = [n for n in gm.graph.nodes if n.target is aten.constant_pad_nd.default]
    assert len(pads) == 4
    for a, b in zip(gm(g), want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert merge_duplicate_pads(gm) == 0
