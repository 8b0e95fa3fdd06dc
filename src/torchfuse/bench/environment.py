"""What a run records about where it ran: device, versions, precision settings, command."""
from __future__ import annotations

import datetime
import importlib.metadata
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

import torch

PACKAGES = ("torch", "triton", "transformers", "timm", "torchvision", "torch_geometric", "numpy")


def device_name(device: str) -> str:
    """``"NVIDIA H200"``-style GPU name, or ``"CPU"``."""
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    return "CPU"


def device_label(device: str) -> str:
    """How charts and tables name the device; CPU numbers say what they are."""
    if device == "cuda":
        return device_name(device)
    return "CPU (torchfuse kernels in Triton's interpreter; not performance figures)"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


def default_output_dir(device: str, quick: bool, today: datetime.date | None = None) -> Path:
    """``benchmarks/results/<date>-<gpu>[-quick]`` (relative to the working directory)."""
    today = today or datetime.date.today()
    suffix = "-quick" if quick else ""
    return Path("benchmarks") / "results" / f"{today.isoformat()}-{slug(device_name(device))}{suffix}"


def package_version(package: str) -> str | None:
    """The installed version of ``package`` (its ``__version__`` when not installed as a
    distribution), or ``None``."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        module = sys.modules.get(package)
        return getattr(module, "__version__", None)


def git_commit() -> str | None:
    """The commit of the torchfuse checkout the harness runs from, if it is one."""
    import torchfuse

    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(torchfuse.__file__).parent,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def versions() -> dict:
    """Python, packages, CUDA and cuDNN versions, and the torchfuse commit."""
    import torchfuse

    out = {"python": platform.python_version(), "torchfuse": torchfuse.__version__, "torchfuse_commit": git_commit()}
    for p in PACKAGES:
        out[p] = package_version(p)
    out["cuda"] = torch.version.cuda
    out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return out


def precision_settings() -> dict:
    """The float32 matrix-product settings (TF32) and cuDNN autotuning in effect."""
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
    }


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def command_line(argv: list[str]) -> str:
    """The command as typed: ``python -m torchfuse.bench ...`` or ``torchfuse bench ...``."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    prefix = "torchfuse bench" if program == "torchfuse" else "python -m torchfuse.bench"
    return " ".join([prefix] + [shlex.quote(a) for a in argv])


def run_metadata(run_id: str, argv: list[str], device: str, settings: dict) -> dict:
    return {
        "run_id": run_id,
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "finished": None,
        "command": command_line(argv),
        "argv": list(argv),
        "process_argv": [Path(sys.argv[0]).name] + list(sys.argv[1:]) if sys.argv else [],  # no machine paths
        "device": device,
        "device_name": device_name(device),
        "device_label": device_label(device),
        "device_count": torch.cuda.device_count() if device == "cuda" else 0,
        "cpu": cpu_name(),
        "platform": platform.platform(),
        "versions": versions(),
        "precision": precision_settings(),
        "settings": settings,
        "not_run": [],
        "interrupted": False,
    }
