"""The TIMM suite: image classifiers from TIMM and torchvision, with random weights.

TIMM models are looked up with ``timm.list_models`` and built with ``timm.create_model``;
torchvision models with ``torchvision.models.list_models`` and ``get_model`` (named
``torchvision.<name>`` in results). A name missing from the installed library version is
recorded as skipped with the reason. Input resolution is the model's default
(``pretrained_cfg["input_size"]`` for TIMM, 224 for torchvision).

Training: cross-entropy on random labels at the batch sizes in :data:`TRAIN_BATCH` (as
PyTorch's TIMM benchmark does, per model); inference at batch 1 and 8. ``--channels-last``
puts model and images in ``torch.channels_last``. ``--quick``: two models narrowed to a few
channels, at 32x32 pixels and batch 2.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from ..modes import INFER_MODES, TRAIN_MODES
from ..workload import BuildContext, Case, Unavailable, Workload, count_parameters

#: TIMM model name -> training batch size
TIMM_MODELS = {
    "resnet50": 128,
    "efficientnet_b0": 128,
    "mobilenetv3_large_100": 256,
    "convnext_tiny": 128,
    "vit_base_patch16_224": 64,
    "swin_tiny_patch4_window7_224": 64,
    "regnety_016": 128,
    "densenet121": 64,
    "inception_v3": 64,
    "ghostnet_100": 256,
    "beit_base_patch16_224": 64,
    "mobilevit_s": 128,
}
#: torchvision model name -> training batch size
TORCHVISION_MODELS = {
    "resnet50": 128,
    "resnext50_32x4d": 64,
    "mobilenet_v3_large": 256,
    "efficientnet_b0": 128,
    "convnext_tiny": 128,
    "regnet_y_1_6gf": 128,
    "vit_b_16": 64,
    "swin_t": 64,
    "densenet121": 64,
    "shufflenet_v2_x1_0": 256,
}
INFER_BATCHES = (1, 8)

#: ``--quick`` models: name -> (library, real name, keyword arguments)
QUICK_MODELS = {
    "resnet18": ("timm", "resnet18", {"channels": (8, 16, 32, 64), "num_classes": 10}),
    "vit_tiny_patch16_224": ("timm", "vit_tiny_patch16_224",
                             {"img_size": 32, "patch_size": 8, "embed_dim": 32, "depth": 2, "num_heads": 2,
                              "num_classes": 10}),
    "torchvision.mobilenet_v3_small": ("torchvision", "mobilenet_v3_small", {"width_mult": 0.25, "num_classes": 10}),
}
QUICK_BATCH = 2
QUICK_PIXELS = 32


def create(library: str, name: str, kwargs: dict) -> tuple[torch.nn.Module, tuple[int, int, int]]:
    """Build ``name`` with random weights; returns it and its input ``(channels, height, width)``.

    Raises:
        Unavailable: the name is not in the library's model list.
    """
    if library == "timm":
        import timm

        if name not in timm.list_models():
            raise Unavailable(f"timm {timm.__version__} has no model {name!r}")
        model = timm.create_model(name, pretrained=False, **kwargs)
        return model, tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
    import torchvision

    if name not in torchvision.models.list_models(module=torchvision.models):
        raise Unavailable(f"torchvision {torchvision.__version__} has no classification model {name!r}")
    return torchvision.models.get_model(name, weights=None, **kwargs), (3, 224, 224)


def build(library: str, name: str, kwargs: dict, batch: int, ctx: BuildContext, pixels: int | None = None) -> Workload:
    """Model ``name`` with random weights, ``batch`` random images of its default resolution
    (``--quick``: :data:`QUICK_PIXELS`; ``pixels``: that many, square) and random labels."""
    torch.manual_seed(ctx.seed)
    model, (channels, height, width) = create(library, name, kwargs)
    if pixels is not None or ctx.quick:
        height = width = pixels or QUICK_PIXELS
    model = model.to(ctx.device).train(ctx.mode.training)
    images = torch.randn(batch, channels, height, width, device=ctx.device)
    if ctx.channels_last:
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    classes = getattr(model, "num_classes", None) or kwargs.get("num_classes", 1000)
    labels = torch.randint(0, classes, (batch,), device=ctx.device)
    info = {"parameters": count_parameters(model), "input": [channels, height, width]}
    return Workload(model=model, inputs={"x": images}, targets={"labels": labels}, loss=_cross_entropy, info=info)


def _cross_entropy(logits, labels):
    return F.cross_entropy(logits, labels)


def cases(quick: bool) -> list[Case]:
    out = []
    if quick:
        for label, (library, name, kwargs) in QUICK_MODELS.items():
            out.append(Case("timm", label, (QUICK_BATCH,), TRAIN_MODES + INFER_MODES,
                            functools.partial(build, library, name, kwargs, QUICK_BATCH), vision=True))
        return out
    tables = [("timm", "", TIMM_MODELS), ("torchvision", "torchvision.", TORCHVISION_MODELS)]
    for library, prefix, table in tables:
        for name, train_batch in table.items():
            sizes = {train_batch: TRAIN_MODES}
            for b in INFER_BATCHES:
                sizes[b] = sizes.get(b, ()) + INFER_MODES
            for batch, modes in sizes.items():
                out.append(Case("timm", prefix + name, (batch,), modes,
                                functools.partial(build, library, name, {}, batch), vision=True))
    return out
