"""The examples and the documentation's snippets run on a CPU-only machine: small sizes,
kernels in Triton's interpreter.

The examples start at once, each in its own process (most of their time is importing
PyTorch and tracing), and must pass their own checks against eager PyTorch and float64.
Every ```python block of README.md and examples/README.md runs as pasted, each in a fresh
namespace, in one process on the CPU with ``TORCHFUSE_INTERPRET=1`` (what the README says to
set); a block that needs a GPU says so with a ``# needs a GPU`` comment and is skipped.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ["transformer_block_fusion.py", "gated_rmsnorm.py", "rope.py"]
DOCS = ["README.md", "examples/README.md"]
GPU_MARKER = "# needs a GPU"


def _env(**extra) -> dict:
    """The environment a user has: ``TORCHFUSE_INTERPRET=1`` is the one switch the README
    names (conftest's ``TRITON_INTERPRET`` is dropped; Triton's interpreter needs no flag)."""
    env = dict(os.environ, **extra,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])))
    env.pop("TRITON_INTERPRET", None)
    return env


def test_examples_check_on_cpu():
    env = _env(TORCHFUSE_INTERPRET="1")
    procs = {name: subprocess.Popen([sys.executable, str(ROOT / "examples" / name), "--device", "cpu", "--check",
                                     "--dtype", "fp32"],  # (the command line's short name)
                                    cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for name in EXAMPLES}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{name} failed:\n{out[-4000:]}"
        assert "kernels: forward 1," in out, out
        assert "max error vs float64" in out, out
        assert out.rstrip().splitlines()[-1].startswith("check: OK"), out[-2000:]


def test_example_check_verdict_and_exit_status(capsys, monkeypatch):
    """``--check`` ends with a verdict line; a failed comparison, a failed expectation or an
    exception in the check gives ``check: FAILED`` and exit status 1."""
    import torch

    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    from example_utils import run_check

    want = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    eager = want.float() + 1e-7

    def good(checks):
        print(checks.close("out", want.float(), eager, want, 1e-6))
        checks.expect(True, "never shown")

    def bad(checks):
        print(checks.close("out", want.float() + 1.0, eager, want, 1e-6))
        checks.expect(False, "the forward became 2 kernels, not 1")

    def crashes(checks):
        raise RuntimeError("boom")

    assert run_check(good) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == "check: OK (2 checks)"
    assert run_check(bad) == 1
    out = capsys.readouterr().out
    assert "<- fusion error too large" in out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("check: FAILED (2 of 2 checks: out error") and "not 1" in last
    assert run_check(crashes) == 1
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == "check: FAILED (1 of 1 checks: RuntimeError: boom)"


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """(line of the opening fence, code) of every ```python block in ``path``."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1))
            for m in re.finditer(r"^```python[^\n]*\n(.*?)^```\s*$", text, re.M | re.S)]


RUN_BLOCKS = r"""
import json, sys, traceback
failed = 0
for name, code in json.load(open(sys.argv[1])):
    print(f"--- {name}", flush=True)
    try:
        exec(compile(code, name, "exec"), {"__name__": "__main__"})
    except BaseException:
        failed += 1
        print(f"FAILED: {name}", flush=True)
        traceback.print_exc(file=sys.stdout)
sys.exit(1 if failed else 0)
"""


def test_documentation_snippets_run_on_cpu(tmp_path):
    blocks = []
    for doc in DOCS:
        found = python_blocks(ROOT / doc)
        assert found, f"no python blocks found in {doc}"
        blocks += [(f"{doc}:{line}", code) for line, code in found if GPU_MARKER not in code]
    assert len(blocks) >= 3
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    env = _env(TORCHFUSE_INTERPRET="1", CUDA_VISIBLE_DEVICES="", TORCHFUSE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TORCHFUSE_DUMP_DIR", None)
    proc = subprocess.run([sys.executable, "-c", RUN_BLOCKS, str(tmp_path / "blocks.json")], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert proc.stdout.count("--- ") == len(blocks)


def test_readme_links_to_its_own_sections():
    """Every ``(#anchor)`` link of the README names one of its headings, slugged as GitHub
    slugs them (lower case, spaces to hyphens, punctuation other than hyphens dropped)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
             for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links and not [a for a in links if a not in slugs], sorted(set(links) - slugs)
