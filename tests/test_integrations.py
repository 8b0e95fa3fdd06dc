"""Where users already train: the HF ``Trainer`` (with accelerate), timm's training path and a
Lightning ``Trainer``, each run with the real package on tiny models, torchfuse against eager.

Each test trains the same model twice from the same seed, once eager and once compiled the
way the README says, and compares the losses step by step (and the weights after). On a CPU
the kernels run in Triton's interpreter (``TORCHFUSE_INTERPRET=1`` from conftest, which
``backend="torchfuse"`` reads, as a user's environment would).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, true_fp32
from torchfuse import backend

#: fp32 losses after a few steps: the fused kernels round differently from eager's on a GPU
LOSS_TOLERANCE = dict(rtol=1e-3, atol=1e-4)



def _fused_training_graphs(before: set[int]) -> list[str]:
    """Names of the graphs compiled since ``before`` (ids) that run fusion groups."""
    return [c.name for c in backend.RECENT if id(c) not in before and c.segmentation.groups]


# -- HF Trainer ----------------------------------------------------------------------------------

def _bert_config():
    import transformers

    return transformers.BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=0.0,
                                   attention_probs_dropout_prob=0.0, num_labels=2,
                                   # set, so the first forward does not write it (a TorchDynamo re-trace)
                                   problem_type="single_label_classification")


def _sentences(n: int = 8, length: int = 8) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 64, (n, length), generator=g)
    labels = torch.randint(0, 2, (n,), generator=g)
    return [{"input_ids": ids[i], "attention_mask": torch.ones(length, dtype=torch.long), "labels": labels[i]}
            for i in range(n)]


def _train_bert(tmp_path, name: str, compile_model: bool):
    import transformers

    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(_bert_config())
    if compile_model:
        model.compile(backend="torchfuse")  # the README's one line, before the Trainer
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / name), per_device_train_batch_size=4, per_device_eval_batch_size=4, max_steps=3,
        learning_rate=1e-2, logging_steps=1, save_strategy="no", report_to=[], seed=0, use_cpu=DEVICE == "cpu",
        dataloader_num_workers=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_sentences(), eval_dataset=_sentences(4))
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    eval_loss = trainer.evaluate()["eval_loss"]
    trainer.save_model(str(tmp_path / name / "saved"))
    return trainer, model, losses, eval_loss


@pytest.mark.slow
def test_hf_trainer_fine_tunes_a_model_compiled_in_place(tmp_path):
    """``model.compile(backend="torchfuse")`` before ``transformers.Trainer``: training and
    evaluation run torchfuse's graphs (accelerate leaves the model alone: it is not an
    ``OptimizedModule``), the losses are eager's, and the saved checkpoint has the model's own
    parameter names (no ``_orig_mod.`` prefix)."""
    from safetensors.torch import load_file

    _, eager_model, eager_losses, eager_eval = _train_bert(tmp_path, "eager", compile_model=False)
    before = {id(c) for c in backend.RECENT}
    trainer, model, losses, eval_loss = _train_bert(tmp_path, "torchfuse", compile_model=True)
    graphs = _fused_training_graphs(before)
    assert {"forward", "backward", "inference"} <= set(graphs), graphs
    assert trainer.model is model and type(model).__name__ == "BertForSequenceClassification"
    assert len(losses) == 3
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager_losses), **LOSS_TOLERANCE)
    torch.testing.assert_close(torch.tensor(eval_loss), torch.tensor(eager_eval), **LOSS_TOLERANCE)
    saved = load_file(str(tmp_path / "torchfuse" / "saved" / "model.safetensors"))
    eager_saved = load_file(str(tmp_path / "eager" / "saved" / "model.safetensors"))
    assert set(saved) == set(eager_saved) and not any("_orig_mod" in k for k in saved)
    for k in eager_saved:
        torch.testing.assert_close(saved[k], eager_saved[k], rtol=1e-3, atol=1e-4, msg=k)


def test_hf_trainer_backend_option_names_only_accelerates_own_backends(tmp_path):
    """What the README says of ``TrainingArguments(torch_compile_backend="torchfuse")``: the
    Trainer passes the name to accelerate, whose ``DynamoBackend`` is a closed list, so it is
    refused before any training (compiling the model in place is the way in)."""
    import transformers

    args = transformers.TrainingArguments(output_dir=str(tmp_path), torch_compile_backend="torchfuse", report_to=[],
                                          use_cpu=True)
    with pytest.raises(ValueError, match="DynamoBackend"):
        transformers.Trainer(model=transformers.BertForSequenceClassification(_bert_config()), args=args)


# -- timm ----------------------------------------------------------------------------------------

def _train_timm(compile_model: bool, steps: int = 2):
    import timm

    torch.manual_seed(0)
    model = timm.create_model("test_resnet", pretrained=False, num_classes=4).to(DEVICE)
    if compile_model:  # what timm's train.py does with --torchcompile torchfuse
        model = torch.compile(model, backend="torchfuse")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        images = torch.randn(4, 3, 32, 32, generator=g).to(DEVICE)
        labels = torch.randint(0, 4, (4,), generator=g).to(DEVICE)
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    module = getattr(model, "_orig_mod", model)
    return torch.stack(losses), dict(module.state_dict())


@pytest.mark.slow
def test_timm_model_compiled_as_train_py_does_trains_like_eager():
    """``timm.create_model`` then ``torch.compile(model, backend="torchfuse")`` (timm's train.py
    with ``--torchcompile torchfuse``): the losses of two SGD steps and the weights and
    BatchNorm statistics after them are eager's. (Four images a batch: with two, BatchNorm over
    the last stages' few values makes fp32 gradients of eager itself differ from float64's by
    more than this test's tolerance after a step.)"""
    with true_fp32():  # cuDNN's TF32 convolutions would differ by more than the tolerance
        eager_losses, eager_state = _train_timm(compile_model=False)
        before = {id(c) for c in backend.RECENT}
        losses, state = _train_timm(compile_model=True)
    assert {"forward", "backward"} <= set(_fused_training_graphs(before))
    torch.testing.assert_close(losses, eager_losses, **LOSS_TOLERANCE)
    assert state.keys() == eager_state.keys()
    for k, v in eager_state.items():
        torch.testing.assert_close(state[k], v, rtol=1e-3, atol=1e-4, msg=lambda m, k=k: f"{k}: {m}")


# -- Lightning -----------------------------------------------------------------------------------

def _lightning_module():
    import lightning as L

    class Classifier(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                           torch.nn.Linear(16, 3))

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Classifier()


def _fit_lightning(compile_model: bool):
    import lightning as L

    class Losses(L.Callback):
        def __init__(self):
            self.values = []

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            self.values.append(outputs["loss"].detach())

    torch.manual_seed(0)
    module = _lightning_module()
    g = torch.Generator().manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g))
    losses = Losses()
    trainer = L.Trainer(max_steps=3, accelerator="gpu" if DEVICE == "cuda" else "cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[losses])
    fitted = torch.compile(module, backend="torchfuse") if compile_model else module
    trainer.fit(fitted, torch.utils.data.DataLoader(data, batch_size=4))
    return torch.stack(losses.values).cpu(), {k: v.cpu() for k, v in module.state_dict().items()}


@pytest.mark.slow
def test_lightning_fits_a_compiled_module_like_eager():
    """``trainer.fit(torch.compile(module, backend="torchfuse"), loader)``: Lightning unwraps the
    compiled module and compiles its ``training_step`` with the same backend; three steps give
    eager's losses and weights, from one forward and one backward graph (no re-trace)."""
    with true_fp32():  # Lightning reads the matrix-product precision: one API's settings
        eager_losses, eager_state = _fit_lightning(compile_model=False)
        before = {id(c) for c in backend.RECENT}
        losses, state = _fit_lightning(compile_model=True)
    assert sorted(_fused_training_graphs(before)) == ["backward", "forward"]
    assert len(losses) == 3
    torch.testing.assert_close(losses, eager_losses, **LOSS_TOLERANCE)
    for k, v in eager_state.items():
        torch.testing.assert_close(state[k], v, rtol=1e-3, atol=1e-4, msg=lambda m, k=k: f"{k}: {m}")
