"""The seed suite: three programs of the kinds torchfuse was started for.

* ``mil_attention``: multiple-instance learning on bags of image patches: a CNN featurizer
  (torchvision's ResNet-18 trunk) embeds every patch, gated attention pooling (Ilse, Tomczak
  and Welling, "Attention-based Deep Multiple Instance Learning", ICML 2018) weighs the
  patches of each bag, a linear classifier labels the bag. Size ``(bags, patches per bag)``.
* ``sag_pool_gnn``: graph classification with self-attention graph pooling (Lee, Lee and
  Kang, "Self-Attention Graph Pooling", ICML 2019: three GCN + SAGPooling stages with max and
  mean readouts), built with PyTorch Geometric; skipped, with the reason recorded, where
  ``torch_geometric`` is not installed. Size ``(graphs, nodes per graph)``.
* ``transformer_encoder_padded``: ``nn.TransformerEncoder`` inference on padded batches of
  sequences of random lengths with a key padding mask, the case PyTorch's fast path
  ("BetterTransformer": nested tensors, fused encoder layers) serves in eager. Padded
  positions of the output are zeroed, as the fast path leaves them, so every backend's
  output is comparable. Size ``(batch, longest sequence)``.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from ..modes import INFER_MODES, TRAIN_MODES
from ..workload import BuildContext, Case, Workload, count_parameters


class GatedAttentionMIL(torch.nn.Module):
    """Bag classifier. ``forward(patches)``: patches ``[bags * bag_size, 3, H, W]``, bag after
    bag; returns logits ``[bags, classes]``."""

    def __init__(self, featurizer: torch.nn.Module, features: int, bag_size: int, attention: int = 128,
                 classes: int = 2):
        super().__init__()
        self.featurizer = featurizer
        self.bag_size = bag_size
        self.attention_v = torch.nn.Linear(features, attention)
        self.attention_u = torch.nn.Linear(features, attention)
        self.attention_w = torch.nn.Linear(attention, 1)
        self.classifier = torch.nn.Linear(features, classes)

    def forward(self, patches):
        h = self.featurizer(patches).flatten(1)
        h = h.view(-1, self.bag_size, h.shape[-1])                     # [bags, patches, features]
        scores = self.attention_w(torch.tanh(self.attention_v(h)) * torch.sigmoid(self.attention_u(h)))
        weights = torch.softmax(scores, dim=1)                          # [bags, patches, 1]
        return self.classifier((weights * h).sum(dim=1))


def _featurizer(quick: bool) -> tuple[torch.nn.Module, int]:
    if quick:
        cnn = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1))
        return cnn, 16
    import torchvision

    trunk = torchvision.models.get_model("resnet18", weights=None)
    trunk.fc = torch.nn.Identity()
    return trunk, 512


def build_mil(size: tuple[int, int], ctx: BuildContext) -> Workload:
    bags, bag_size = size
    pixels = 16 if ctx.quick else 96
    torch.manual_seed(ctx.seed)
    featurizer, features = _featurizer(ctx.quick)
    model = GatedAttentionMIL(featurizer, features, bag_size).to(ctx.device).train(ctx.mode.training)
    patches = torch.randn(bags * bag_size, 3, pixels, pixels, device=ctx.device)
    if ctx.channels_last:
        model = model.to(memory_format=torch.channels_last)
        patches = patches.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 2, (bags,), device=ctx.device)
    return Workload(model=model, inputs={"patches": patches}, targets={"labels": labels}, loss=_cross_entropy,
                    info={"parameters": count_parameters(model), "patch_pixels": pixels})


def _cross_entropy(logits, labels):
    return F.cross_entropy(logits, labels)


class SAGPoolNet(torch.nn.Module):
    """SAGPool's hierarchical architecture. ``forward(x, edge_index, batch)``: node features
    ``[nodes, features]``, edges ``[2, edges]`` (int64), graph of each node ``[nodes]``;
    returns logits ``[graphs, classes]``."""

    def __init__(self, features: int, hidden: int, graphs: int, classes: int = 2, ratio: float = 0.5):
        super().__init__()
        from torch_geometric.nn import GCNConv, SAGPooling

        self.graphs = graphs
        self.convs = torch.nn.ModuleList([GCNConv(features, hidden), GCNConv(hidden, hidden), GCNConv(hidden, hidden)])
        self.pools = torch.nn.ModuleList([SAGPooling(hidden, ratio) for _ in range(3)])
        self.head = torch.nn.Sequential(
            torch.nn.Linear(2 * hidden, hidden), torch.nn.ReLU(), torch.nn.Dropout(0.5),
            torch.nn.Linear(hidden, hidden // 2), torch.nn.ReLU(), torch.nn.Linear(hidden // 2, classes))

    def forward(self, x, edge_index, batch):
        from torch_geometric.nn import global_max_pool, global_mean_pool

        readout = 0
        for conv, pool in zip(self.convs, self.pools):
            x = F.relu(conv(x, edge_index))
            x, edge_index, _, batch, _, _ = pool(x, edge_index, batch=batch)
            readout = readout + torch.cat([global_max_pool(x, batch, size=self.graphs),
                                           global_mean_pool(x, batch, size=self.graphs)], dim=1)
        return self.head(readout)


def random_graphs(graphs: int, nodes: int, features: int, device: str) -> dict:
    """``graphs`` random undirected graphs of ``nodes`` nodes and ``4 * nodes`` edges each."""
    edges = 4 * nodes
    src = torch.randint(0, nodes, (graphs, edges), device=device)
    dst = torch.randint(0, nodes, (graphs, edges), device=device)
    offset = (torch.arange(graphs, device=device) * nodes)[:, None]
    src, dst = (src + offset).flatten(), (dst + offset).flatten()
    edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    return {"x": torch.randn(graphs * nodes, features, device=device), "edge_index": edge_index,
            "batch": torch.arange(graphs, device=device).repeat_interleave(nodes)}


def build_gnn(size: tuple[int, int], ctx: BuildContext) -> Workload:
    graphs, nodes = size
    features, hidden = (8, 16) if ctx.quick else (64, 128)
    torch.manual_seed(ctx.seed)
    model = SAGPoolNet(features, hidden, graphs).to(ctx.device).train(ctx.mode.training)
    inputs = random_graphs(graphs, nodes, features, ctx.device)
    labels = torch.randint(0, 2, (graphs,), device=ctx.device)
    return Workload(model=model, inputs=inputs, targets={"labels": labels}, loss=_cross_entropy,
                    info={"parameters": count_parameters(model), "edges": int(inputs["edge_index"].shape[1])})


class PaddedEncoder(torch.nn.Module):
    """``forward(src, padding_mask)``: ``src [batch, sequence, d_model]``, ``padding_mask
    [batch, sequence]`` (True at padding); returns the encoding with padding zeroed."""

    def __init__(self, d_model: int, heads: int, feedforward: int, layers: int):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d_model, heads, feedforward, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=True)

    def forward(self, src, padding_mask):
        out = self.encoder(src, src_key_padding_mask=padding_mask)
        return out.masked_fill(padding_mask.unsqueeze(-1), 0.0)


def build_encoder(size: tuple[int, int], ctx: BuildContext) -> Workload:
    batch, longest = size
    d_model, heads, feedforward, layers = (32, 2, 64, 2) if ctx.quick else (512, 8, 2048, 6)
    torch.manual_seed(ctx.seed)
    model = PaddedEncoder(d_model, heads, feedforward, layers).to(ctx.device).train(ctx.mode.training)
    lengths = torch.randint(longest // 4, longest + 1, (batch,), device=ctx.device)
    lengths[0] = longest
    mask = torch.arange(longest, device=ctx.device)[None, :] >= lengths[:, None]
    src = torch.randn(batch, longest, d_model, device=ctx.device)
    return Workload(model=model, inputs={"src": src, "padding_mask": mask},
                    info={"parameters": count_parameters(model), "padding": float(mask.float().mean())})


def cases(quick: bool) -> list[Case]:
    if quick:
        return [
            Case("seed", "mil_attention", (2, 4), TRAIN_MODES + INFER_MODES, functools.partial(build_mil, (2, 4)),
                 vision=True),
            Case("seed", "sag_pool_gnn", (4, 8), TRAIN_MODES + INFER_MODES, functools.partial(build_gnn, (4, 8)),
                 requires="torch_geometric"),
            Case("seed", "transformer_encoder_padded", (2, 8), INFER_MODES, functools.partial(build_encoder, (2, 8))),
        ]
    out = [Case("seed", "mil_attention", (8, 64), TRAIN_MODES + INFER_MODES, functools.partial(build_mil, (8, 64)),
                vision=True),
           Case("seed", "mil_attention", (1, 64), INFER_MODES, functools.partial(build_mil, (1, 64)), vision=True)]
    out.append(Case("seed", "sag_pool_gnn", (128, 32), TRAIN_MODES + INFER_MODES,
                    functools.partial(build_gnn, (128, 32)), requires="torch_geometric"))
    out += [Case("seed", "transformer_encoder_padded", (b, 256), INFER_MODES, functools.partial(build_encoder, (b, 256)))
            for b in (8, 64)]
    return out
