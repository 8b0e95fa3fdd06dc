"""The examples run on a CPU-only machine: small sizes, kernels in Triton's interpreter.

Both examples start at once, each in its own process (most of their time is importing
PyTorch and tracing), and must pass their own checks against eager PyTorch and float64.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ["transformer_block_fusion.py", "gated_rmsnorm.py"]


def test_examples_check_on_cpu():
    env = dict(os.environ, TORCHFUSE_INTERPRET="1", TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])))
    procs = {name: subprocess.Popen([sys.executable, str(ROOT / "examples" / name), "--device", "cpu", "--check"],
                                    cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for name in EXAMPLES}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{name} failed:\n{out[-4000:]}"
        assert "kernels: forward 1," in out, out
        assert "max error vs float64" in out, out
