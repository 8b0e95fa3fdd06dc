"""Test configuration.

Without a GPU every generated kernel runs under Triton's interpreter on CPU tensors (that is
how CI exercises them); with one, tests run on CUDA tensors with compiled kernels.
"""
from __future__ import annotations

import contextlib
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TORCHFUSE_INTERPRET", "1")
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton is first imported

import pytest  # noqa: E402

import interpreter_bounds  # noqa: E402

#: interpreted kernels' loads and stores checked against their tensor arguments (see the module)
BOUNDS_CHECKED = interpreter_bounds.install()

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(autouse=True)
def _reset_dynamo():
    import torch._dynamo

    torch._dynamo.reset()
    yield


@contextlib.contextmanager
def true_fp32():
    """TF32 off for cuBLAS and cuDNN inside the block (fp32 products compared with eager's in
    true fp32), the settings restored after.

    PyTorch keeps two TF32 APIs: the legacy flags (``torch.backends.cudnn.allow_tf32``) and
    per-backend, per-op precisions (``torch.backends.cudnn.conv.fp32_precision``), whose
    ``"none"`` inherits from ``cuda`` then ``generic``. Reading the legacy cuDNN flag raises
    when the two disagree (torch 2.11), and ``torch.backends.cudnn.flags`` reads it on exit: a
    state that an earlier test left (``generic`` at ``tf32``, say) made every such exit raise.
    So the block sets the legacy flag *and* pins the conv and RNN precisions to ``ieee``,
    which agree whatever their parents say, and restores all of them through the setters
    PyTorch's own flag context managers use (PyTorch's test utilities, imported by the
    conformance tests, forbid setting the flags as attributes)."""
    C = torch._C
    ops = ("conv", "rnn", "matmul")
    saved = {op: C._get_fp32_precision_getter("cuda", op) for op in ops}
    legacy, matmul = _read_legacy(C._get_cudnn_allow_tf32), _read_legacy(torch.get_float32_matmul_precision)
    C._set_cudnn_allow_tf32(False)
    for op in ops:
        C._set_fp32_precision_setter("cuda", op, "ieee")
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        if legacy is not None:
            C._set_cudnn_allow_tf32(legacy)
        if matmul is not None:
            torch.set_float32_matmul_precision(matmul)
        for op, value in saved.items():  # last: the legacy setters above write them too
            C._set_fp32_precision_setter("cuda", op, value)


@contextlib.contextmanager
def data_dependent_capture():
    """TorchDynamo capturing ``.item()`` and ops whose output size depends on the data (graphs
    with unbacked sizes), a fresh TorchDynamo, every warning recorded: yields the list of
    caught warnings."""
    import warnings

    import torch._dynamo

    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def _read_legacy(getter):
    """A legacy TF32 flag's value, ``None`` when the two APIs already disagree (the getter
    raises then): only the per-op precisions are restored."""
    try:
        return getter()
    except RuntimeError:
        return None


@pytest.fixture
def device() -> str:
    """The device tests run on: CUDA when present, else CPU through the interpreter."""
    return DEVICE


@pytest.fixture
def topic_logs(caplog):
    """Turn on ``TORCHFUSE_LOGS`` topics as the environment would (``topic_logs("fusion", ...)``)
    with ``caplog`` also receiving their records (a chosen topic does not propagate to the root
    logger, where ``caplog`` listens); every topic logger is restored afterwards."""
    import logging

    from torchfuse.config import LOG_TOPICS, configure_logging

    loggers = [logging.getLogger(f"torchfuse.{t}") for t in LOG_TOPICS]
    saved = [(lg.level, lg.propagate, list(lg.handlers)) for lg in loggers]

    def turn_on(*topics: str) -> None:
        configure_logging(frozenset(topics))
        for t in topics:
            logging.getLogger(f"torchfuse.{t}").addHandler(caplog.handler)

    yield turn_on
    for lg, (level, propagate, handlers) in zip(loggers, saved):
        lg.setLevel(level)
        lg.propagate = propagate
        lg.handlers[:] = handlers


def pytest_addoption(parser):
    group = parser.getgroup("torchfuse")
    group.addoption("--fuzz-examples", type=int, default=100,
                    help="random programs tests/test_fuzz.py tries (CI: 100, derandomized)")
    group.addoption("--fuzz-seed", type=int, default=None,
                    help="seed for tests/test_fuzz.py (default: derandomized, the same programs every run)")
    group.addoption("--gpu-launch-configs", type=int, default=0, metavar="SM_COUNT",
                    help="under the interpreter, launch every kernel with the configuration the GPU heuristics "
                         "pick for a device of SM_COUNT multiprocessors (e.g. 132, an H200) instead of the "
                         "interpreter's largest blocks: many programs, masked tails, narrow tiles (sets the "
                         "default of Options.launch_configs_for_sm_count)")
    group.addoption("--update-golden", action="store_true",
                    help="tests/test_golden_kernels.py: rewrite tests/golden/*.json from the kernels generated now")
    group.addoption("--golden-sources", default=None, metavar="DIR",
                    help="tests/test_golden_kernels.py: write every kernel source of the corpus under DIR (to diff "
                         "two commits)")


#: the environment default of ``Options.launch_configs_for_sm_count`` (documented in
#: :mod:`torchfuse.config.options`): scripts set it, or pass the option, to plan every kernel
#: with a GPU's launch configurations under the interpreter
LAUNCH_CONFIGS_ENV = "TORCHFUSE_LAUNCH_CONFIGS_FOR_SM_COUNT"


def pytest_configure(config):
    sm = config.getoption("--gpu-launch-configs")
    if sm and DEVICE == "cpu":  # a thin wrapper over Options.launch_configs_for_sm_count
        os.environ[LAUNCH_CONFIGS_ENV] = str(sm)
