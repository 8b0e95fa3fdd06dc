"""Recompilation in a training loop over varying sequence lengths: TorchDynamo marks a dim
dynamic at its second size and compiles once more; torchfuse's kernels take the sizes as
arguments (no new kernels for later sizes); ``TORCHFUSE_LOGS=recompile`` says why each time.
On the test device: CUDA tensors with compiled kernels where there is a GPU, else CPU tensors
under Triton's interpreter."""
from __future__ import annotations

import logging

import pytest
import torch

import torchfuse
from conftest import DEVICE
from torchfuse import backend


class TinyBlock(torch.nn.Module):
    """A pre-norm attention block (one head, width 8) with a GELU and a mean-square loss."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        attn = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
        x = x + torch.nn.functional.gelu(attn @ v)
        return (x * x).mean()


def train(model, batches):
    """One SGD step per batch; returns the losses and the final weights."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x in batches:
        loss = model(x)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    return losses, [p.detach().clone() for p in model.parameters()]


@pytest.mark.slow
def test_training_over_five_sequence_lengths_and_a_partial_batch_recompiles_once(caplog, topic_logs):
    g = torch.Generator().manual_seed(0)
    batches = [torch.randn(4, s, 8, generator=g).to(DEVICE) for s in (4, 6, 8, 10, 12)]
    batches.append(torch.randn(3, 12, 8, generator=g).to(DEVICE))
    # the batch dim varies only at the last, partial batch: marked dynamic as a data loader's
    # last batch is best handled (otherwise TorchDynamo compiles a third time there)
    torch._dynamo.mark_dynamic(batches[0], 0)
    torch.manual_seed(0)
    eager = TinyBlock().to(DEVICE)
    compiled_model = TinyBlock().to(DEVICE)
    compiled_model.load_state_dict(eager.state_dict())

    torch._dynamo.reset()
    known = {id(c): c for c in backend.RECENT}  # held: an evicted graph's id could be reused
    topic_logs("recompile")
    with caplog.at_level(logging.INFO, logger="torchfuse.recompile"):
        losses, weights = train(torchfuse.compile(compiled_model, cache_dir=None), batches)
    expected_losses, expected_weights = train(eager, batches)
    torch.testing.assert_close(torch.stack(losses), torch.stack(expected_losses), rtol=1e-4, atol=1e-5)
    for got, want in zip(weights, expected_weights):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)

    graphs = [c for c in backend.RECENT if id(c) not in known]
    forwards = [c for c in graphs if c.name == "forward"]
    assert len(forwards) == 2, [c.name for c in graphs]  # the first compile and one recompile
    dynamic = forwards[-1]
    assert dynamic.symbols, "the recompiled graph has symbolic sizes"
    # later sizes run the dynamic graph's kernels with new launch plans, no new kernel sources
    generated = {len(r.sources) for r in dynamic.steps if hasattr(r, "sources")}
    assert generated <= {0, 1}, generated
    messages = [r.getMessage() for r in caplog.records if r.name == "torchfuse.recompile"]
    dynamo = [m for m in messages if m.startswith("TorchDynamo compiles")]
    assert len(dynamo) == 1 and "size mismatch" in dynamo[0] and "expected 4, actual 6" in dynamo[0], messages
    assert any("new sizes" in m for m in messages), messages  # torchfuse's plans for later sizes
    # both name the capture by TorchDynamo's compile id: the guards of the first failed, the
    # graph planning new sizes is the recompiled one's
    assert dynamic.compile_id is not None and dynamic.compile_id[1] == forwards[0].compile_id[1] + 1
    frame, first = forwards[0].compile_id
    assert f"the guards of TorchDynamo compile {frame}/{first} failed: " in dynamo[0], dynamo
    assert all(m.startswith(f"forward of TorchDynamo compile {frame}/{first + 1}: new sizes")
               for m in messages if "new sizes" in m and m.startswith("forward")), messages


def test_a_recompilation_whose_guards_failed_for_several_versions_is_one_entry(caplog, topic_logs):
    """When every compiled version's guards fail (here two static versions, then a third size),
    TorchDynamo records one failure per version; the ``recompile`` log and ``explain`` count
    one recompilation, naming both failed guards."""
    def f(x):
        return torch.tanh(x) * 2

    sizes = [torch.randn(4, 8), torch.randn(6, 8), torch.randn(10, 8)]
    torch._dynamo.reset()
    topic_logs("recompile")
    with caplog.at_level(logging.INFO, logger="torchfuse.recompile"), \
            torch._dynamo.config.patch(automatic_dynamic_shapes=False):  # each size a static version
        result = torchfuse.explain(f, sizes[0], more_inputs=[(x,) for x in sizes[1:]], verbose=False)
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("TorchDynamo compiles")]
    dynamo = [r for r in result.recompilations if r.source == "dynamo"]
    assert len(logged) == len(dynamo) == 2, (logged, dynamo)  # 6 rows, then 10 rows
    assert logged[0].count("failed: ") == 1 and logged[1].count("failed: ") == 2, logged
    assert dynamo[1].reason.count("failed: ") == 2 and "expected 6, actual 10" in dynamo[1].reason, dynamo
    for x in sizes:
        torch.testing.assert_close(torchfuse.compile(f, dynamic=False, interpret=True)(x), f(x))
