"""Decomposition: which ATen ops are lowered to the registry's primitives before fusion.

Takes the ``decompose`` section of :class:`~torchfuse.config.Tuning`; returns the table
AOTAutograd applies while tracing. It is PyTorch's own core
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
import math

import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._decomp.decompositions import pw_cast_for_opmath
from torch._prims_common import suggest_memory_format

from .config import DecomposeTuning
from .kernel_formulas import (LOAD_AT_RESULT_DTYPE, _eager_strides, _operands_at_result_dtype, addcdiv, addcmul,
                              binary_cross_entropy, binary_cross_entropy_backward, gelu, gelu_backward,
                              glu_backward, hardsigmoid_backward, hardswish_backward, huber_loss, huber_loss_backward,
                              lerp_scalar, lerp_tensor, log_softmax_backward_data, logit_backward, logsumexp,
                              mish_backward, mse_loss, mse_loss_backward, sigmoid_backward, silu, silu_backward,
                              smooth_l1_loss, smooth_l1_loss_backward, soft_margin_loss, soft_margin_loss_backward,
                              softmax_backward_data, tanh_backward, weight_norm_interface)

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
    aten.linalg_vector_norm,  # in torch 2.14's core table, not in 2.11's (which left it on ATen)
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
    # nll_loss checks its targets (an out-of-range class raises IndexError in eager); the
    # core decomposition gathers without that check, so a bad target would raise a different
    # error. The forward over (N, C) rows on ``Tuning.decompose.nll_by_mask_devices`` is decomposed by
    # nll_loss_forward_by_mask (with a device-side check); elsewhere it runs as PyTorch's kernel.
    aten.nll_loss_forward.default,
    aten.nll_loss2d_forward.default,
    aten.var_mean.correction,
    aten.var.correction,
    aten.mean.dim,
    aten.mean.default,
    aten.addmm.default,
    # Eager's kernels check each index (a negative one raises, a source of another shape
    # raises); the decompositions, an index_put, count a negative index from the end and
    # broadcast the source. One kernel either way: nothing is lost to fusion.
    aten.index_add.default,
    aten.index_copy.default,
    # Eager converts start and end to the dtype and steps in it (an integer linspace wraps as
    # an int; one that overflows raises); the decompositions compute in double or fp32 from
    # the unconverted numbers: uint8 linspace(-5, 5, 4) gave [251, 255, 1, 5] for eager's
    # [251, 169, 87, 5], and floats an ulp off. affine_grid's builds its grid with them. Small
    # tensors, usually made once: ATen's kernels cost nothing that matters.
    aten.linspace.default,
    aten.linspace.Tensor_Tensor,
    aten.linspace.Tensor_Scalar,
    aten.linspace.Scalar_Tensor,
    aten.logspace.default,
    aten.logspace.Tensor_Tensor,
    aten.logspace.Tensor_Scalar,
    aten.logspace.Scalar_Tensor,
    aten.affine_grid_generator.default,
    # the window is eager's composite, each step rounded to an fp16/bf16 dtype; the
    # decomposition computes in fp32 and rounds once (10 of 16 fp16 elements differed)
    aten.hann_window.default,
    aten.hann_window.periodic,
    # ATen's kernels (CPU and CUDA) switch from the erfc form to the erfcx form below -1, the
    # decomposition below 1: on [-1, 1) 40% of fp32 and fp64 values were a few ulps from
    # eager's. erfcx runs on ATen either way, so nothing is lost to fusion.
    aten.special_log_ndtr.default,
]


#: Why ops of KEEP_WHOLE still run through ATen after decomposition, for ``explain``.
#: The reason given for ``copy_`` calls: AOTAutograd's writes back to graph inputs that need no
#: gradient (BatchNorm's running statistics), run as one multi-tensor copy per dtype
#: (``runtime.executor.InputWriteBatch``).
INPUT_WRITE = ("writes an input buffer back, as BatchNorm's running statistics and batch counter "
               "(batched: one multi-tensor copy per dtype)")

KEPT_REASONS = {
    aten.copy_.default: INPUT_WRITE,
    aten.nll_loss_forward.default:
        "kept on ATen: its target range check raises eager's error (decomposed on CUDA only)",
    aten.embedding_dense_backward.default: "kept on ATen: PyTorch's scatter-add kernel is faster",
    aten.index_add.default: "kept on ATen: eager's kernel checks the indices and the source's shape",
    aten.index_copy.default: "kept on ATen: eager's kernel checks the indices and the source's shape",
}


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
    n_classes = self.shape[1]
    # Per row, the class whose gradient is -grad_output, or -1 for none; 32-bit when the class
    # count allows it, so the kernel compares 32-bit class indices per element (a 64-bit
    # comparison is two instructions). Out-of-range targets were reported by the forward;
    # masking them here keeps a wrapped 32-bit index from naming a class.
    index_dtype = torch.int32 if isinstance(n_classes, int) and n_classes < 2**31 else torch.int64
    picked_class = torch.where((target != ignore_index) & (target >= 0) & (target < n_classes), target, -1)
    classes = torch.arange(n_classes, dtype=index_dtype, device=self.device)
    hit = classes == picked_class.to(index_dtype)
    return torch.where(hit, -grad_output, 0).to(self.dtype)


def nll_loss_forward_by_mask(self: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None,
                             reduction: int, ignore_index: int, *, devices: tuple[str, ...] = ("cuda",)
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """``aten.nll_loss_forward`` for a batch of rows as masked row reductions, without a
    gather, so that it fuses with the log-softmax that computes ``self``: the cross-entropy
    forward becomes one row kernel that reads the logits once and writes per-row values, plus
    a small kernel for the sum or mean over rows.

    Args:
        self: (N, C) log-probabilities, floating point.
        target: (N,) int64 class indices in ``[0, C)``, or ``ignore_index``.
        weight: None, or (C,) class weights of ``self``'s dtype.
        reduction: 0 none, 1 mean, 2 sum (``torch.nn._reduction``).
        ignore_index: a target value whose rows count for nothing (loss 0, weight 0).
        devices: the device types it applies to (``Tuning.decompose.nll_by_mask_devices``).

    Returns:
        ``(output, total_weight)``, as PyTorch's ``nll_loss_forward``
        (``torch._decomp.decompositions.nll_loss_forward`` and the CUDA kernel in
        ``aten/src/ATen/native/cuda/Loss.cu``): ``output`` is (N,) for ``none``, where row i
        is ``-self[i, t] * weight[t]`` (the product rounded to ``self``'s dtype as eager
        rounds it) or 0 where ``t = target[i]`` is ignored; for ``sum`` the sum of those over
        rows, for ``mean`` that sum divided by ``total_weight``, both accumulated in fp32 for
        fp16/bf16 (CUDA's accumulate type) and rounded once; NaN for ``mean`` when every target
        is ignored (0 / 0), as in eager. ``total_weight`` is a 0-dim tensor of ``self``'s dtype:
        the sum of ``weight[t]`` (1 without weights) over the rows not ignored, 0 for ``none``.
        ``NotImplemented`` (make_fx then records ``nll_loss_forward`` itself, PyTorch's kernel)
        for other ranks, target dtypes, weight shapes or dtypes, and devices outside
        ``devices``, so that eager's checks and errors apply there.

    Raises:
        RuntimeError, asynchronously on CUDA (at the next synchronization, like eager's
        device-side assert; at once on a CPU in tests): a target outside ``[0, C)`` that is not
        ``ignore_index``. The check is ``_assert_async`` on ``all((0 <= t < C) | ignored)``:
        no host synchronization, and no extra pass (its per-row part runs in the row kernel,
        its ``all`` in the kernel that reduces over the rows). The masked sums never index
        memory with a target, so a bad one reads nothing out of bounds before the check fires.

    Motivation: kept whole, ``nll_loss_forward`` made the fused log-softmax write the full
    (N, C) log-probabilities for PyTorch's loss kernel to read; the cross-entropy forward (bf16,
    16384 x 4096, ``label_smoothing=0.1``) ran as 4-5 kernels at 18-34% of the bandwidth of a
    device copy on an H200, where one read of the logits is the least traffic. Measured there
    with this decomposition: the same 94 us of GPU time (before: a 72 us log-softmax kernel that
    wrote the log-probabilities and PyTorch's 19 us single-block loss kernel; now an 88 us row
    kernel, bound by its instructions rather than its 128 MiB read, and 7 us of small kernels),
    with 128 MiB less traffic and no (N, C) buffer.
    """
    if not _nll_by_mask_applies(self, target, weight, devices):
        return NotImplemented
    n_classes = self.shape[1]
    kept = target != ignore_index
    in_range = (target >= 0) & (target < n_classes)
    # Per row, the class to pick, or -1 for none (ignored, or out of range). 32-bit when the
    # class count allows it: the row kernel then makes one 32-bit comparison per element, with
    # class indices from its loop index.
    index_dtype = torch.int32 if isinstance(n_classes, int) and n_classes < 2**31 else torch.int64
    picked_class = torch.where(kept & in_range, target, -1).to(index_dtype)
    hit = torch.arange(n_classes, dtype=index_dtype, device=self.device) == picked_class.unsqueeze(1)
    acc = torch.float32 if self.dtype in (torch.float16, torch.bfloat16) else self.dtype
    # (N, C) masks and selections live in registers only. One term per row passes the mask, so
    # each sum is that term exactly (summed in acc, the kernel's accumulate type, it is not
    # rounded back to self's dtype element by element).
    picked = torch.where(hit, self.to(acc), 0).sum(1).to(self.dtype)
    row_weight = None if weight is None else torch.where(hit, weight.to(acc), 0).sum(1).to(self.dtype)
    if row_weight is not None:
        picked = picked * row_weight  # rounded to self's dtype, as the kernel's product
    # Negated after the product, so zeros keep eager's sign (-0.0 for a row whose target has
    # probability 1); ignored rows are +0.0.
    output = torch.where(kept, -picked, 0)
    # Traced after the values above, so that the segmenter puts the check's per-row part in the
    # row kernel (with the masks it shares) and its `all` in the small kernel that reduces over
    # the rows; traced first, the check becomes a kernel of its own.
    aten._assert_async.msg((in_range | ~kept).all(), "Target out of bounds")
    if reduction == 0:  # none
        return output, self.new_zeros(())
    total_weight = kept.sum(dtype=acc) if row_weight is None else row_weight.sum(dtype=acc)
    output = output.sum(dtype=acc)
    if reduction == 1:  # mean
        output = output / total_weight
    return output.to(self.dtype), total_weight.to(self.dtype)


def _nll_by_mask_applies(self: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None,
                         devices: tuple[str, ...]) -> bool:
    """Whether :func:`nll_loss_forward_by_mask` takes these arguments: anything eager would
    reject (a shape or dtype mismatch) goes to PyTorch's kernel, which raises eager's error."""
    if self.device.type not in devices or self.dim() != 2 or target.dim() != 1:
        return False
    if not self.dtype.is_floating_point or target.dtype != torch.int64 or target.device != self.device:
        return False
    if weight is not None and (weight.dim() != 1 or weight.dtype != self.dtype or weight.device != self.device):
        return False
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    same = guard_or_false(self.shape[0] == target.shape[0])
    return same and (weight is None or guard_or_false(weight.shape[0] == self.shape[1]))


def native_dropout(input: torch.Tensor, p: float, train: bool | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``aten.native_dropout`` with the mask drawn as eager's CUDA kernel draws it: an fp32
    uniform number per element compared with ``p`` in fp32 (``fused_dropout`` in
    aten/src/ATen/native/cuda/Dropout.cu keeps an element where its ``curand`` uniform is below
    ``1 - p``), whatever ``input``'s dtype.

    Returns ``(output, mask)``: ``output`` of ``input``'s shape and dtype, ``input * mask /
    (1 - p)`` rounded once; ``mask`` bool. ``p == 1`` gives ``input`` times a 0-dim zero of its
    dtype and an all-false mask, as eager's ``F.dropout`` (``_dropout_impl`` multiplies by
    ``at::zeros({}, input.options())``) and CPU's ``native_dropout`` compute it: NaN where
    ``input`` is NaN or infinite, ``-0.0`` where it is negative (PyTorch's decomposition gives
    zeros there), and ``input``'s dtype kept (a bool or integer tensor's zeros; a Python ``0``
    would promote bools to int64); not training or ``p == 0`` gives ``input`` and an all-true
    mask.

    Raises:
        RuntimeError: a training dropout of an integer tensor (eager's error).

    PyTorch's decomposition draws ``rand_like(input)`` in ``input``'s dtype and compares it with
    ``p`` in that dtype: in bf16 the uniform and ``p`` are rounded to 8 bits, so a bf16 dropout
    kept 69.86% of the elements at ``p = 0.3`` (4 standard deviations over 2M elements) and
    none at all at ``p = 0.995``, where fp32 keeps ``1 - p`` of them.
    """
    if not train or p == 0:
        return input, torch.ones_like(input, dtype=torch.bool)
    if p == 1:
        return input * input.new_zeros(()), torch.zeros_like(input, dtype=torch.bool)
    if not input.dtype.is_floating_point:
        raise RuntimeError("result type Float can't be cast to the desired output type Long")
    mask = torch.rand_like(input, dtype=torch.float32) > p
    return mask * input * float(1.0 / (1.0 - p)), mask


def scalar_tensor(s, *, dtype: torch.dtype | None = None, device=None):
    """``prims.scalar_tensor`` of a Python float beyond ``dtype``'s finite range, as eager's
    kernels read such a number: converted unchecked, to inf (or to the largest finite value,
    by rounding to nearest). PyTorch's references wrap a binary op's number operand this way
    (``xlogy(x, 1e40)``, ``copysign``, ``floor_divide``), and the op converts it checked
    ("value cannot be converted to type float without overflow") where eager's
    ``xlogy.Scalar_Other`` returns a value: the number is made a float64 scalar and cast.

    Args:
        s: the number; ``dtype``, ``device``: the tensor's.

    Returns:
        A 0-dim tensor of ``dtype``, or ``NotImplemented`` (the op as traced) for every other
        number and dtype."""
    if (isinstance(s, float) and dtype is not None and dtype.is_floating_point and dtype != torch.float64
            and math.isfinite(s) and abs(s) > torch.finfo(dtype).max):
        return aten.scalar_tensor.default(s, dtype=torch.float64, device=device).to(dtype)
    return NotImplemented


def native_group_norm_backward(grad_output: torch.Tensor, input: torch.Tensor, mean: torch.Tensor,
                               rstd: torch.Tensor, gamma: torch.Tensor | None, N: int, C: int, HxW: int,
                               group: int, output_mask: list[bool]):
    """``aten.native_group_norm_backward`` from the normalized input ``xhat = (x - mean) * rstd``,
    as LayerNorm's backward is computed: per group of ``M = C / group * HxW`` elements,
    ``dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`` with ``g = gamma * dy``,
    ``dgamma = sum(dy * xhat)`` and ``dbeta = sum(dy)`` over N and HxW.

    Args: as the ATen op: ``grad_output`` and ``input`` (N, C, *) of one floating dtype,
    ``mean`` and ``rstd`` (N, group) as the forward saved them, ``gamma`` None or (C,).
    Returns ``(dx, dgamma, dbeta)``, each None where ``output_mask`` says so, computed in fp32
    for fp16/bf16 (the opmath type) and rounded once to the dtypes PyTorch's decomposition
    returns. Arguments that op would reject go to PyTorch's decomposition, which raises its error.

    PyTorch's decomposition, like eager's kernels (``GroupNormKernel.cpp``,
    ``group_norm_kernel.cu``), forms ``dx = rstd * gamma * dy + c2 * x + c3`` from
    ``sum(dy * x)`` and ``sum(dy) * mean``, which cancel where the group's spread is small
    against its mean: over a group of one element (``x == mean``, ``rstd = 1 / sqrt(eps)``)
    its input gradient came out 6e-5 instead of 0, and the weight gradients of groups 1e3
    from zero lost about 3e-4 of their value in fp32. Centering first keeps those digits
    (exactly 0 where the group is one element) at the same reads: one pass over ``x`` and
    ``dy`` for the per-channel sums, one for ``dx``.
    """
    from torch._decomp import decompositions as pytorch_decompositions

    cpg = C // group if group else 0
    if not cpg or C != cpg * group or tuple(mean.shape) != (N, group) or input.numel() != N * C * HxW:
        return pytorch_decompositions.native_group_norm_backward(
            grad_output, input, mean, rstd, gamma, N, C, HxW, group, output_mask)
    return _group_norm_backward_centered(grad_output, input, mean, rstd, gamma, N, C, HxW, group, output_mask)


@pw_cast_for_opmath
def _group_norm_backward_centered(grad_output, input, mean, rstd, gamma, N, C, HxW, group, output_mask):
    """The arithmetic of :func:`native_group_norm_backward`, in the opmath dtype (its decorator
    casts the operands up and the results back, as for PyTorch's decomposition)."""
    cpg = C // group
    dy = grad_output.reshape(N, group, cpg, HxW)
    rstd4 = rstd.reshape(N, group, 1, 1)
    xhat = (input.reshape(N, group, cpg, HxW) - mean.reshape(N, group, 1, 1)) * rstd4
    dy_xhat = (dy * xhat).sum(3)  # (N, group, cpg): per sample and channel
    dy_sum = dy.sum(3)
    d_input = d_gamma = d_bias = None
    if output_mask[0]:
        if gamma is not None:
            g = gamma.reshape(1, group, cpg)
            g_dy, g_xhat, g_sum = dy * g.unsqueeze(-1), (dy_xhat * g).sum(2), (dy_sum * g).sum(2)
        else:
            g_dy, g_xhat, g_sum = dy, dy_xhat.sum(2), dy_sum.sum(2)
        m = 1.0 / (cpg * HxW)
        d_input = rstd4 * (g_dy - (g_sum * m).reshape(N, group, 1, 1) - xhat * (g_xhat * m).reshape(N, group, 1, 1))
        d_input = d_input.reshape(input.shape).to(input.dtype)
    if output_mask[1]:
        d_gamma = dy_xhat.sum(0).reshape(C)
    if output_mask[2]:
        d_bias = dy_sum.sum(0).reshape(C)
    return d_input, d_gamma, d_bias


def _check_unpool_indices(indices: torch.Tensor, output_size) -> None:
    """Eager's check of ``max_unpool``'s indices: each in ``[0, prod(output_size))`` (ATen's
    CPU kernel raises, its CUDA kernel asserts), as an asynchronous device-side check. PyTorch's
    decomposition scatters through ``index_put``, which counts a negative index from the end
    and raises ``IndexError`` past the end."""
    if indices.dtype == torch.int64:  # else the decomposition raises eager's dtype error
        aten._assert_async.msg(((indices >= 0) & (indices < math.prod(output_size))).all(),
                               "Found an invalid max index")


def max_unpool2d(self: torch.Tensor, indices: torch.Tensor, output_size) -> torch.Tensor:
    """``aten.max_unpool2d``: PyTorch's decomposition after eager's index check
    (:func:`_check_unpool_indices`): an invalid index raises ``RuntimeError``. Same dtype as
    ``self``, shaped ``(*self.shape[:-2], *output_size)``."""
    from torch._decomp.decompositions import max_unpool2d as pytorch_max_unpool2d

    _check_unpool_indices(indices, output_size)
    return pytorch_max_unpool2d(self, indices, output_size)


def max_unpool3d(input: torch.Tensor, indices: torch.Tensor, output_size, stride, padding) -> torch.Tensor:
    """``aten.max_unpool3d``: as :func:`max_unpool2d`, over three dims."""
    from torch._decomp.decompositions import max_unpool3d as pytorch_max_unpool3d

    _check_unpool_indices(indices, output_size)
    return pytorch_max_unpool3d(input, indices, output_size, stride, padding)


#: Batch-norm forward ops whose PyTorch decompositions round the saved mean and inverse
#: standard deviation to a CPU input's dtype (``native_batch_norm_helper``)
_BATCH_NORMS = [aten.native_batch_norm.default, aten._native_batch_norm_legit.default,
                aten._native_batch_norm_legit.no_stats, aten._native_batch_norm_legit_functional.default,
                aten._native_batch_norm_legit_no_training.default]


def _in_fp32_where(decomposition, applies):
    """A normalization's ``decomposition`` (returning its output first, then its statistics),
    run on the input converted to fp32 where ``applies(input, *args, **kwargs)`` is true: the
    statistics stay in fp32 and the output is rounded back to the input's dtype once, as
    eager's fp32 arithmetic rounds it. Other calls pass unchanged."""
    def run(input, *args, **kwargs):
        if not applies(input, *args, **kwargs):
            return decomposition(input, *args, **kwargs)
        out = decomposition(input.float(), *args, **kwargs)
        return (out[0].to(input.dtype), *out[1:])
    return run


def _half_cpu_input(input, *args, **kwargs) -> bool:
    """Where :func:`_in_fp32_where` runs PyTorch's batch-norm decomposition in fp32: fp16/bf16
    CPU inputs.

    That decomposition rounds the saved mean and inverse standard deviation of a CPU input to
    its dtype, which the backward then reads: for an fp16 input about 1000 from zero the mean
    is off by up to a quarter, and the input gradient came out a hundred times eager's error
    against float64. From an fp32 input it keeps them in fp32. CUDA inputs pass unchanged (the
    decomposition keeps fp32 statistics there)."""
    return input.device.type == "cpu" and input.dtype in (torch.float16, torch.bfloat16)


#: Activation gradients whose PyTorch decompositions end in a ``where`` over a mask of the
#: forward's tensor, so their result takes that tensor's layout; ATen's kernels lay it out as
#: ``grad_output`` first (its TensorIterator's operand order): ``k``'s gradient through
#: ``elu(k).transpose(1, 2) @ v`` came out contiguous where eager's is transposed
_GRAD_OUTPUT_LAYOUT = [aten.elu_backward.default, aten.hardtanh_backward.default, aten.softplus_backward.default,
                       aten.hardswish_backward.default, aten.hardsigmoid_backward.default]


def _with_eager_strides(decomposition):
    """``decomposition``, its result laid out as ATen's kernel lays out the op's result from its
    tensor operands in order (:func:`~torchfuse.kernel_formulas._eager_strides`: a relayout
    fused into the kernel that computes it, where the layouts differ)."""
    @functools.wraps(decomposition)
    def run(*args, **kwargs):
        out = decomposition(*args, **kwargs)
        if out is NotImplemented or not isinstance(out, torch.Tensor):
            return out
        return _eager_strides(out, *(a for a in args if isinstance(a, torch.Tensor)))
    return run


def roll_in_cpu_format(a: torch.Tensor, shifts, dims=(), *, reference):
    """``aten.roll`` (PyTorch's decomposition, ``reference``, an ``index_select``), its result
    in the memory format eager's CPU kernel gives it. On CPU tensors eager rolls one dim as a
    ``cat`` of two slices, ``a[start:]`` and ``a[:start]``, whose result keeps the slices'
    suggested format where they agree (a channels-last input gives a channels-last result)
    and is contiguous otherwise, or where ``start`` is 0; ``index_select`` always returns a
    contiguous result. Several dims roll one after another (each through this rule); a roll
    of the flattened tensor (no dims) is contiguous, as on CUDA tensors. Symbolic sizes keep
    the decomposition's layout."""
    out = reference(a, shifts, dims)
    if not isinstance(shifts, (list, tuple)):
        shifts = (shifts,)
    if not isinstance(dims, (list, tuple)):
        dims = (dims,)
    if (a.device.type != "cpu" or len(dims) != 1 or len(shifts) != 1 or a.numel() == 0
            or not all(type(v) is int for v in (*a.shape, *a.stride(), shifts[0]))):
        return out
    size = a.shape[dims[0]]
    start = (size - shifts[0]) % size
    if start == 0:
        return out
    fmt = suggest_memory_format(a.narrow(dims[0], start, size - start))
    if fmt != suggest_memory_format(a.narrow(dims[0], 0, start)):
        fmt = torch.contiguous_format
    if out.is_contiguous(memory_format=fmt):
        return out
    return out.contiguous(memory_format=fmt)


def _half_input_with_fp32_params(input, weight, bias, *args, **kwargs) -> bool:
    """Where :func:`_in_fp32_where` runs PyTorch's group-norm decomposition in fp32: an
    fp16/bf16 input whose weight or bias is fp32 (the mix CPU autocast gives
    ``native_group_norm``).

    Eager's kernel keeps the saved mean and inverse standard deviation of such a mixed call in
    the parameters' dtype (fp32), the decomposition rounds them to the input's, and the
    backward reads them: a bf16 input's weight gradient came out at 2e-3 of its value from
    float64, where eager's is at 3e-8. Calls of one dtype pass unchanged (eager's statistics
    have the input's dtype there), and CUDA calls of mixed dtypes never get here: they stay on
    ATen, which raises eager's error (:data:`RECORDED_AS_IS`)."""
    return (input.dtype in (torch.float16, torch.bfloat16)
            and any(p is not None and p.dtype == torch.float32 for p in (weight, bias)))


def _half_cpu_input_with_fp32_params(input, normalized_shape, weight=None, bias=None, *args, **kwargs) -> bool:
    """Where :func:`_in_fp32_where` runs PyTorch's layer-norm decomposition in fp32: an fp16/bf16
    CPU input whose weight or bias is fp32 (the mix CPU autocast gives ``native_layer_norm``).

    As for group norm (:func:`_half_input_with_fp32_params`), eager's CPU kernel keeps the saved
    mean and inverse standard deviation of such a mixed call in fp32, the decomposition rounds
    them to the input's dtype on CPU tensors, and the backward reads them: a bf16 input's
    gradient was a bf16 step from eager's (and from float64's rounding) in a third of its
    elements. Calls of one dtype pass unchanged (eager's statistics have the input's dtype
    there), and so do CUDA calls (the decomposition keeps fp32 statistics there)."""
    return input.device.type == "cpu" and _half_input_with_fp32_params(input, weight, bias)


def unsafe_masked_index(x: torch.Tensor, mask: torch.Tensor, indices: list, fill) -> torch.Tensor:
    """``aten._unsafe_masked_index`` as eager computes it: ``x[indices]`` where ``mask`` is set,
    ``fill`` elsewhere, each index first clamped to ``[-size, size - 1]`` of its dim and a
    negative one counted from the end (ATen's kernel: ``clamp`` then ``_unsafe_index``).

    PyTorch's decomposition clamps to ``[0, size - 1]``, which reads element 0 where eager
    reads element ``size + i``; here the indices are wrapped first, then that decomposition
    runs (its clamp is then a no-op, and its checks apply). Indices that are not int64 or int32
    pass unchanged, so the decomposition raises eager's error. An empty ``x`` gives eager's
    result: ``fill`` indexed out of a tensor whose indexed dims of size 0 have size 1 and whose
    dims after the last index have size 0 (ATen's kernel; the mask is not read).
    Returns ``x``'s dtype, shaped as indexing with ``indices`` shapes it.
    """
    from torch._decomp.decompositions import _unsafe_masked_index
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    wrapped = []
    for d, index in enumerate(indices):
        if index is not None and index.dtype in (torch.int64, torch.int32):
            size = x.size(d)
            index = index.clamp(min=-size, max=size - 1)
            index = torch.where(index < 0, index + size, index)
        wrapped.append(index)
    if guard_or_false(x.numel() == 0) and all(i is None or i.dtype in (torch.int64, torch.int32) for i in indices):
        sizes = [(1 if size == 0 else size) if i is not None else size for i, size in zip(indices, x.shape)]
        sizes += [0] * (x.dim() - len(sizes))
        return aten._unsafe_index(x.new_full(sizes, fill), wrapped)
    return _unsafe_masked_index(x, mask, wrapped, fill)


def index_fill(self: torch.Tensor, dim: int, index: torch.Tensor, value) -> torch.Tensor:
    """``aten.index_fill`` as eager computes it: ``self`` with the slices ``index`` along
    ``dim`` set to ``value`` (a number or a 0-dim tensor), a negative index in ``[-size, 0)``
    counted from the end. Same dtype, shape and strides as ``self``.

    PyTorch's decomposition writes through ``index_copy``, whose kernel (kept on ATen, which
    checks each index) rejects negative indices that eager's ``index_fill`` accepts; here those
    are wrapped first. An index outside ``[-size, size)`` passes unchanged, so ``index_copy``
    raises eager's ``IndexError`` with eager's message. An index that is not int64 is left to
    eager's kernel (``NotImplemented``), which raises its ``IndexError``.
    """
    from torch._refs import index_fill as pytorch_index_fill

    if index.dtype != torch.int64:
        return NotImplemented
    size = self.size(dim) if self.dim() > 0 else 1  # eager indexes a 0-dim tensor as a 1-element one
    index = torch.where((index < 0) & (index >= -size), index + size, index)
    if isinstance(value, torch.Tensor):  # eager casts the value as it writes it
        value = value.to(self.dtype)
    return pytorch_index_fill(self, dim, index, value)


def select_scatter(self: torch.Tensor, src: torch.Tensor, dim: int, index: int) -> torch.Tensor:
    """``aten.select_scatter`` as eager computes it: a copy of ``self`` whose slice ``index``
    along ``dim`` is ``src`` cast to ``self``'s dtype. Same dtype and shape as ``self``.

    Raises eager's errors where PyTorch's decomposition (a ``where`` over a mask) returned a
    value: ``IndexError`` for an index outside ``[-size, size)`` (the mask matched nothing and
    ``self`` came back unchanged), ``RuntimeError`` for a ``src`` whose shape is not the
    slice's (it was broadcast); and it casts ``src`` where that decomposition promoted the
    result to ``src``'s dtype.
    """
    from torch._prims_common import canonicalize_dim
    from torch._refs import select_scatter as pytorch_select_scatter

    d = canonicalize_dim(self.dim(), dim)
    size = self.shape[d]
    torch._check_index(-size <= index < size, lambda: (
        f"select(): index {index} out of range for tensor of size {list(self.shape)} at dimension {dim}"))
    slice_shape = [*self.shape[:d], *self.shape[d + 1:]]
    torch._check(list(src.shape) == slice_shape, lambda: (
        f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
        f"slice size = {slice_shape}"))
    return pytorch_select_scatter(self, src.to(self.dtype), d, index)


#: Element alignment cuBLAS's fast half-precision kernels need on every dimension (16 bytes).
MM_ALIGN = 8


def _mm_padding(a: torch.Tensor, b: torch.Tensor, tuning: DecomposeTuning) -> tuple[int, int, int] | None:
    """Elements to append to M, K and N of ``a @ b`` (fp16/bf16, 2-D, static sizes), or None
    when its leading dimensions are aligned, the product is small (``tuning.mm_pad_min_macs``),
    or not on a padded device (``tuning.mm_pad_devices``).

    cuBLAS needs aligned leading dimensions only: K and N always (``b`` and the row-major
    result), M only when ``a`` is column-major (a transposed operand, such as the vocabulary
    side of a language-model head's weight gradient, ``grad_logits.t() @ h``)."""
    if a.dim() != 2 or b.dim() != 2 or a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype:
        return None
    if a.device.type not in tuning.mm_pad_devices:
        return None
    m, k = a.shape
    n = b.shape[1]
    if not all(type(x) is int for x in (m, k, n)) or m * n * k < tuning.mm_pad_min_macs:
        return None
    # a row-major ``a`` of 197 tokens (a ViT at batch 1) has lda = K: padding M would be a copy
    # per product for nothing
    column_major = a.stride(0) == 1 and a.stride(1) != 1
    pads = (-m % MM_ALIGN if column_major else 0, -k % MM_ALIGN, -n % MM_ALIGN)
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


def mm_padded(a: torch.Tensor, b: torch.Tensor, *, tuning: DecomposeTuning = DecomposeTuning()):
    """``aten.mm`` with fp16/bf16 dimensions that are not multiples of 8 (a language model's
    vocabulary: GPT-2's 50257, BERT's 30522) computed on zero-padded operands, then sliced:
    ``pad(a) @ pad(b)`` is ``a @ b`` in its top-left corner (the padded terms of each dot product
    are zeros). cuBLAS runs misaligned half-precision products on slow kernels: GPT-2's
    language-model head and its two gradients took 7.9 ms of a 30 ms training step (8 x 512) on
    an H200, about 3x the aligned kernels' time; the same padding is Inductor's ``pad_mm``.
    Returns ``NotImplemented`` (PyTorch's way of declining a decomposition) when no padding
    applies; otherwise a contiguous ``(M, N)`` tensor. ``tuning``: which products are padded."""
    pads = _mm_padding(a, b, tuning)
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


def addmm_padded(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta=1, alpha=1,
                 tuning: DecomposeTuning = DecomposeTuning()):
    """``aten.addmm`` padded as :func:`mm_padded` when the bias is a vector over N (a linear
    layer's, kept in cuBLAS's epilogue); other biases decline (``NotImplemented``)."""
    pads = _mm_padding(a, b, tuning)
    if pads is None or bias.dim() != 1 or bias.shape[0] != b.shape[1]:
        return NotImplemented
    m, n = a.shape[0], b.shape[1]
    a, b = _pad_operands(a, b, pads)
    if pads[2]:
        bias = torch.nn.functional.pad(bias, (0, pads[2]))
    return _unpad(aten.addmm.default(bias, a, b, beta=beta, alpha=alpha), m, n, pads)


def reduce_at_dtype(op):
    """A decomposition of ``op`` (``aten.sum`` or ``aten.prod``, an overload with a ``dtype=``
    keyword) as ATen's ``make_reduction`` computes it: the input converted to ``dtype`` element
    by element, then reduced with the same ``dtype`` (an integer sum without it is int64). The
    registry's reduction would otherwise reduce the unconverted values and round once (fp16
    ``sum`` of three int32 2049s: 6148, eager's 6144). Declines (``NotImplemented``: the op is
    recorded as it is) when ``dtype`` is absent or already the input's."""
    @functools.wraps(op)
    def decomposition(self, *args, dtype=None, **kwargs):
        if dtype is None or dtype == self.dtype:
            return NotImplemented
        return op(aten._to_copy.default(self, dtype=dtype), *args, dtype=dtype, **kwargs)

    return decomposition


#: reductions whose ``dtype=`` converts the input first (:func:`reduce_at_dtype`)
REDUCE_AT_DTYPE = (aten.sum.dim_IntList, aten.sum.default, aten.prod.dim_int, aten.prod.default)


def _integral(*values) -> bool:
    """The dtype eager's kernel would compute in (of the tensors and numbers) is an integer or bool."""
    dtype = functools.reduce(torch.promote_types, (torch.result_type(v, v) for v in values))
    return not (dtype.is_floating_point or dtype.is_complex)


def _first_integral(x, *args, **kwargs) -> bool:
    return _integral(x)


#: unsigned dtypes with few ATen kernels (none for ``logical_not``)
_BARE_UNSIGNED = frozenset({torch.uint16, torch.uint32, torch.uint64})

#: dtypes whose ``all`` eager computes but whose ``logical_not`` (in its decomposition) has no
#: kernel: the bare unsigned ones and the float8 ones
_NO_LOGICAL_NOT = _BARE_UNSIGNED | frozenset({torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                                              torch.float8_e5m2fnuz, torch.float8_e8m0fnu})


def _threshold_by_kernel(x, threshold, value) -> bool:
    """Bool tensors (no kernel), and integer tensors with a threshold or value that is not an
    int: eager's kernel converts both to the tensor's dtype first, truncating
    (``threshold(x, -1.7, 5)`` of an int32 ``x`` replaces -1, ``value=2.9`` writes 2) and raising
    where one does not fit, where PyTorch's decomposition compares and selects in floating point."""
    return x.dtype == torch.bool or (_integral(x) and not all(isinstance(v, int) for v in (threshold, value)))


def _no_blas_kernel(x, *args, **kwargs) -> bool:
    """Matrix-vector products: no bool kernel anywhere, no integer kernel on CUDA (cuBLAS)."""
    return x.dtype == torch.bool or (x.device.type == "cuda" and _integral(x))


def _params_of_another_dtype_on_cuda(input, weight=None, bias=None, *args, **kwargs) -> bool:
    """GroupNorm or LayerNorm of a CUDA input whose weight or bias has another dtype: CUDA's
    kernels read the parameters in the input's dtype and raise ("expected scalar type Half but
    found Float"; LayerNorm's measured with torch 2.11 on an H100) where PyTorch's
    decomposition would compute (CPU's kernels take the mix)."""
    return input.device.type == "cuda" and any(p is not None and p.dtype != input.dtype for p in (weight, bias))


#: arguments for which a decomposition must not run, so that the op is recorded as it is
#: (:func:`declines_for`) and ATen computes it, or raises eager's error, when the graph runs:
#: eager's kernel raises (no kernel for the dtype, on CPU and CUDA unless the rule reads the
#: device; mixed dtypes) where the decomposition would compute a value, or the decomposition's
#: own ops have no kernel for the dtype (``all`` of uint16, uint32 and uint64: ``logical_not``).
#: The dtypes are those PyTorch's OpInfo database lists as supported for each op, checked
#: against eager. Softmax with an integer result and the activations of integer tensors are
#: found earlier, on TorchDynamo's graph, whose whole graph then runs as traced
#: (:func:`~torchfuse.passes.fx.eager_raises`)
RECORDED_AS_IS = {
    aten.frac.default: _first_integral,
    aten.native_group_norm.default: _params_of_another_dtype_on_cuda,
    aten.native_layer_norm.default: lambda input, shape, weight=None, bias=None, *a, **k:
        _params_of_another_dtype_on_cuda(input, weight, bias),
    aten.logaddexp.default: lambda a, b: _integral(a, b),
    aten.logaddexp2.default: lambda a, b: _integral(a, b),
    aten.addcdiv.default: lambda x, t1, t2, value=1: _integral(t1, t2),
    aten.threshold.default: _threshold_by_kernel,
    aten.heaviside.default: lambda a, b: a.dtype != b.dtype,
    aten.log_sigmoid_forward.default: _first_integral,
    aten.soft_margin_loss.default: _first_integral,
    aten.smooth_l1_loss.default: _first_integral,
    aten.huber_loss.default: _first_integral,
    aten.max_unpool2d.default: _first_integral,
    aten.max_unpool3d.default: _first_integral,
    aten.im2col.default: _first_integral,
    aten.dot.default: _no_blas_kernel, aten.vdot.default: _no_blas_kernel, aten.mv.default: _no_blas_kernel,
    aten.trace.default: lambda x: x.dtype == torch.bool and x.device.type == "cpu",
    aten.all.default: lambda x: x.dtype in _NO_LOGICAL_NOT, aten.all.dim: lambda x, *a, **k: x.dtype in _NO_LOGICAL_NOT,
    aten.all.dims: lambda x, *a, **k: x.dtype in _NO_LOGICAL_NOT,
}


def _complex_operand(*args, **kwargs) -> bool:
    """A tensor argument (or one in a list argument) is complex. Kernels take no complex dtype,
    so a decomposition of such a call only changes its values: PyTorch's ``sgn`` (``x /
    abs(x)``, also ``abs``'s gradient), ``silu``, ``vdot`` and the norms of complex tensors were
    an ulp from eager's kernels, and ``mse_loss``, which eager does not implement for them,
    returned a value."""
    for a in (*args, *kwargs.values()):
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, torch.Tensor) and t.is_complex():
                return True
    return False


def declines_for(decomposition, rule):
    """``decomposition`` returning ``NotImplemented`` (the op is recorded as it is) for the
    arguments where ``rule(*args)`` is true (:data:`RECORDED_AS_IS`)."""
    @functools.wraps(decomposition)
    def guarded(*args, **kwargs):
        if rule(*args, **kwargs):
            return NotImplemented
        return decomposition(*args, **kwargs)

    return guarded


#: decompositions (those of :mod:`torchfuse.kernel_formulas`, and ``roll``'s layout) that call or
#: fall back to PyTorch's own (their ``reference``) where eager's kernels' formula does not apply
WITH_REFERENCE = (
    (aten._softmax_backward_data.default, softmax_backward_data),
    (aten._log_softmax_backward_data.default, log_softmax_backward_data),
    (aten.tanh_backward.default, tanh_backward), (aten.sigmoid_backward.default, sigmoid_backward),
    (aten.hardswish_backward.default, hardswish_backward),
    (aten.gelu.default, gelu), (aten.gelu_backward.default, gelu_backward),
    (aten.silu.default, silu), (aten.silu_backward.default, silu_backward),
    (aten.mish_backward.default, mish_backward), (aten.glu_backward.default, glu_backward),
    (aten.logsumexp.default, logsumexp),
    (aten.mse_loss.default, mse_loss), (aten.mse_loss_backward.default, mse_loss_backward),
    (aten.smooth_l1_loss.default, smooth_l1_loss), (aten.smooth_l1_loss_backward.default, smooth_l1_loss_backward),
    (aten.huber_loss.default, huber_loss), (aten.huber_loss_backward.default, huber_loss_backward),
    (aten.binary_cross_entropy.default, binary_cross_entropy),
    (aten.binary_cross_entropy_backward.default, binary_cross_entropy_backward),
    (aten.lerp.Scalar, lerp_scalar), (aten.lerp.Tensor, lerp_tensor),
    (aten.addcmul.default, addcmul), (aten.addcdiv.default, addcdiv),
    (aten._weight_norm_interface.default, weight_norm_interface),
    (aten.roll.default, roll_in_cpu_format),
)


def _bind(fn, **fixed):
    """``fn`` with keyword arguments ``fixed`` given (keeps its name for PyTorch's logs)."""
    @functools.wraps(fn)
    def bound(*args, **kwargs):
        return fn(*args, **kwargs, **fixed)

    return bound


@functools.lru_cache(maxsize=None)
def decomposition_table(tuning: DecomposeTuning = DecomposeTuning()) -> dict:
    """The decomposition table (``OpOverload -> callable``) handed to AOTAutograd, for
    ``tuning`` (``Tuning.decompose``: where cross-entropy's forward is decomposed and which
    matrix products are padded).

    Returns one dict per ``tuning`` (cached); callers must not mutate it.
    """
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(EXTRA_DECOMPOSITIONS))
    for op in KEEP_WHOLE:
        table.pop(op, None)
    table[aten.nll_loss_forward.default] = _bind(nll_loss_forward_by_mask, devices=tuning.nll_by_mask_devices)
    table[aten.nll_loss_backward.default] = nll_loss_backward_by_mask
    table[aten.mm.default] = _bind(mm_padded, tuning=tuning)
    table[aten.addmm.default] = _bind(addmm_padded, tuning=tuning)
    table[aten._unsafe_masked_index.default] = unsafe_masked_index
    table[aten.index_fill.int_Scalar] = index_fill
    table[aten.index_fill.int_Tensor] = index_fill
    table[aten.select_scatter.default] = select_scatter
    table[aten.max_unpool2d.default] = max_unpool2d
    table[aten.max_unpool3d.default] = max_unpool3d
    table[aten.native_dropout.default] = native_dropout
    table[aten.logit_backward.default] = logit_backward
    table[aten.hardsigmoid_backward.default] = hardsigmoid_backward
    table[torch.ops.prims.scalar_tensor.default] = scalar_tensor
    table[aten.soft_margin_loss.default] = soft_margin_loss
    table[aten.soft_margin_loss_backward.default] = soft_margin_loss_backward
    table[aten.native_group_norm_backward.default] = native_group_norm_backward
    for op in REDUCE_AT_DTYPE:
        table[op] = reduce_at_dtype(op)
    for op, formula in WITH_REFERENCE:  # after the core table: each reads PyTorch's own entry
        table[op] = _bind(formula, reference=table[op])
    for op in _BATCH_NORMS:
        if op in table:
            table[op] = _in_fp32_where(table[op], _half_cpu_input)
    table[aten.native_group_norm.default] = _in_fp32_where(table[aten.native_group_norm.default],
                                                           _half_input_with_fp32_params)
    table[aten.native_layer_norm.default] = _in_fp32_where(table[aten.native_layer_norm.default],
                                                           _half_cpu_input_with_fp32_params)
    for op in _GRAD_OUTPUT_LAYOUT:
        if op in table:
            table[op] = _with_eager_strides(table[op])
    for op in LOAD_AT_RESULT_DTYPE:
        if op in table:
            table[op] = _operands_at_result_dtype(table[op])
    for op, rule in RECORDED_AS_IS.items():  # last: before any other formula runs
        if op in table:
            table[op] = declines_for(table[op], rule)
    for op in table:  # complex calls run as ATen's kernels compute them
        table[op] = declines_for(table[op], _complex_operand)
    return table
