"""Decomposition: which ATen ops are lowered to the registry's primitives before fusion.

Takes nothing; returns the table AOTAutograd applies while tracing. It is PyTorch's own core
ATen decomposition table plus PyTorch's decompositions (from ``torch._decomp``) of the
composite ops that dominate memory traffic (normalizations, softmax, activations and their
backward ops), so that their pieces land in fusion groups.

Ops deliberately *not* decomposed: matrix products and convolutions (``addmm`` keeps its
bias epilogue in cuBLAS), ``var_mean``/``var`` (kept whole so the reduction scheduler can use
Welford's algorithm instead of two passes), ``mean`` and ``amax``, which the registry reduces
directly.
"""
from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten

#: Composite ops whose PyTorch decompositions we want in addition to the core table.
EXTRA_DECOMPOSITIONS = [
    aten._softmax,
    aten._log_softmax,
    aten.native_layer_norm,
    aten.native_group_norm,
    aten.native_batch_norm,
    aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit_no_training,
    aten.gelu,
    aten.hardtanh,
    aten.leaky_relu,
    aten.elu,
    aten.hardsigmoid,
    aten.hardswish,
    aten.silu,
    aten.mish,
    aten.softplus,
    aten.native_dropout,
]

#: Core-table entries we remove, because the registry fuses these ops better whole.
KEEP_WHOLE = [
    # Attention stays on its fused library kernels (flash, memory-efficient, cuDNN): their
    # decompositions are the unfused math path (and the CPU one returns the attention
    # probabilities where its backward reads the logsumexp, which makes gradients wrong).
    aten.scaled_dot_product_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_cudnn_attention.default,
    # An embedding's backward is a scatter-add: PyTorch's dedicated kernel beats the
    # decomposition (a sort-based deterministic index_put in fp32), measured 5.5 ms of a
    # 30 ms BERT-base training step on an H200.
    aten.embedding_dense_backward.default,
    # nll_loss checks its targets (an out-of-range class raises IndexError in eager); its
    # decomposition gathers without that check, so a bad target would raise a different
    # error. Kept whole, the loss runs as PyTorch's kernel after the fused log-softmax.
    aten.nll_loss_forward.default,
    aten.nll_loss2d_forward.default,
    aten.var_mean.correction,
    aten.var.correction,
    aten.mean.dim,
    aten.mean.default,
    aten.addmm.default,
]


def nll_loss_backward_by_mask(grad_output: torch.Tensor, self: torch.Tensor, target: torch.Tensor,
                              weight: torch.Tensor | None, reduction: int, ignore_index: int,
                              total_weight: torch.Tensor) -> torch.Tensor:
    """``aten.nll_loss_backward`` for a batch of rows (``self`` of shape (N, C), ``target`` (N,)
    int64) as one pointwise expression: ``-grad_output`` (divided by ``total_weight`` for the
    mean, times ``weight[target]``) where the class index equals the target and the target
    is not ``ignore_index``, 0 elsewhere. Returns ``self``'s shape and dtype.

    PyTorch's decomposition builds the same values by zero-filling an (N, C) tensor and
    scattering -1 into it, which on the GPU costs a fill, a device copy (the functional
    scatter) and a scatter kernel before the loss gradient is read again: 106 us of a 214 us
    cross-entropy backward (bf16, 16384 x 4096) on an H200. As a comparison with the class
    index it fuses into the log-softmax backward kernel. Targets were range-checked by the
    forward, which stays PyTorch's kernel. Other shapes use PyTorch's decomposition.
    """
    if self.dim() != 2 or target.dim() != 1:
        from torch._decomp.decompositions import nll_loss_backward

        return nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)
    if reduction == 1:  # mean (torch.nn._reduction)
        grad_output = grad_output / total_weight
    target = target.unsqueeze(1)
    if grad_output.dim() == 1:  # reduction="none": one gradient per row
        grad_output = grad_output.unsqueeze(1)
    if weight is not None:
        grad_output = grad_output * weight.reshape(1, -1)
    classes = torch.arange(self.shape[1], device=self.device)
    hit = (classes == target) & (target != ignore_index)
    return torch.where(hit, -grad_output, 0).to(self.dtype)


#: Element alignment cuBLAS's fast half-precision kernels need on every dimension (16 bytes).
MM_ALIGN = 8
#: Smallest ``M * N * K`` whose misaligned product is padded: below it the copies of the
#: padded operands cost about what the aligned kernel saves.
MM_PAD_MIN_MACS = 1 << 28
#: Device types whose matrix products are padded (cuBLAS); tests add the CPU.
MM_PAD_DEVICES = ("cuda",)


def _mm_padding(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int, int] | None:
    """Elements to append to M, K and N of ``a @ b`` (fp16/bf16, 2-D, static sizes), or
    None when the product is aligned, small, or not on a padded device."""
    if a.dim() != 2 or b.dim() != 2 or a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype:
        return None
    if a.device.type not in MM_PAD_DEVICES:
        return None
    m, k = a.shape
    n = b.shape[1]
    if not all(type(x) is int for x in (m, k, n)) or m * n * k < MM_PAD_MIN_MACS:
        return None
    pads = tuple(-x % MM_ALIGN for x in (m, k, n))
    return pads if any(pads) else None


def _pad_2d(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """``x`` with ``rows`` zero rows and ``cols`` zero columns appended, padded in its own memory
    order: a transposed (column-major) operand is padded as its row-major transpose and
    transposed back, so the copy reads and writes contiguously, the result stays column-major
    (cuBLAS takes either), and the pad of a weight ``W`` behind ``W.t()`` is the same op as
    the pad of ``W`` itself (AOTAutograd's common-subexpression pass merges the two)."""
    if x.stride(0) == 1 and x.stride(1) != 1:
        return torch.nn.functional.pad(x.t(), (0, rows, 0, cols)).t()
    return torch.nn.functional.pad(x, (0, cols, 0, rows))


def _pad_operands(a: torch.Tensor, b: torch.Tensor, pads: tuple[int, int, int]):
    pm, pk, pn = pads
    if pm or pk:
        a = _pad_2d(a, pm, pk)
    if pk or pn:
        b = _pad_2d(b, pk, pn)
    return a, b


def mm_padded(a: torch.Tensor, b: torch.Tensor):
    """``aten.mm`` with fp16/bf16 dimensions that are not multiples of 8 (a language model's
    vocabulary: GPT-2's 50257, BERT's 30522) computed on zero-padded operands, then sliced:
    ``pad(a) @ pad(b)`` is ``a @ b`` in its top-left corner (the padded terms of each dot product
    are zeros). cuBLAS runs misaligned half-precision products on slow kernels: GPT-2's
    language-model head and its two gradients took 7.9 ms of a 30 ms training step (8 x 512) on
    an H200, about 3x the aligned kernels' time; the same padding is Inductor's ``pad_mm``.
    Returns ``NotImplemented`` (PyTorch's way of declining a decomposition) when no padding
    applies; otherwise a contiguous ``(M, N)`` tensor."""
    pads = _mm_padding(a, b)
    if pads is None:
        return NotImplemented
    m, n = a.shape[0], b.shape[1]
    a, b = _pad_operands(a, b, pads)
    return _unpad(aten.mm.default(a, b), m, n, pads)


def _unpad(out: torch.Tensor, m: int, n: int, pads: tuple[int, int, int]) -> torch.Tensor:
    """The ``(M, N)`` corner of a padded product, as a tensor of its own: a slice would make
    the product's result a view of an intermediate, which AOTAutograd returns as a view that
    cannot be modified in place (eager's result can). The copy fuses into the kernel that
    reads the result."""
    if not pads[0] and not pads[2]:
        return out  # only K was padded: the product has the right shape already
    return out[:m, :n].clone(memory_format=torch.contiguous_format)


def addmm_padded(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta=1, alpha=1):
    """``aten.addmm`` padded as :func:`mm_padded` when the bias is a vector over N (a linear
    layer's, kept in cuBLAS's epilogue); other biases decline (``NotImplemented``)."""
    pads = _mm_padding(a, b)
    if pads is None or bias.dim() != 1 or bias.shape[0] != b.shape[1]:
        return NotImplemented
    m, n = a.shape[0], b.shape[1]
    a, b = _pad_operands(a, b, pads)
    if pads[2]:
        bias = torch.nn.functional.pad(bias, (0, pads[2]))
    return _unpad(aten.addmm.default(bias, a, b, beta=beta, alpha=alpha), m, n, pads)


@functools.lru_cache(maxsize=None)
def decomposition_table() -> dict:
    """The decomposition table (``OpOverload -> callable``) handed to AOTAutograd.

    Returns a fresh dict each time it is built; callers must not mutate the cached one.
    """
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(EXTRA_DECOMPOSITIONS))
    for op in KEEP_WHOLE:
        table.pop(op, None)
    table[aten.nll_loss_backward.default] = nll_loss_backward_by_mask
    table[aten.mm.default] = mm_padded
    table[aten.addmm.default] = addmm_padded
    return table
