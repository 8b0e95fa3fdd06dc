"""Tuning: the heuristics' constants as typed data carried by ``Options`` (parsing, errors,
the environment default, what ``explain`` shows, and values that reach their readers)."""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

import torchfuse
import torchfuse.backend as backend
from conftest import DEVICE
from torchfuse.config import Options, Tuning, parse_tuning, tuning_fields


def test_replace_converts_strings_to_each_field_type():
    t = parse_tuning("codegen.all_true_masks=False, split.min_r=4096, runtime.progress_delay_seconds=0.5, "
                     "decompose.nll_by_mask_devices=cuda,cpu, graph_passes.conv_epilogue_dtypes=float32,bfloat16\n"
                     "pointwise.small_configs=((1, 128, 4), (2, 256, 8))")
    assert t.codegen.all_true_masks is False and t.split.min_r == 4096
    assert t.runtime.progress_delay_seconds == 0.5
    assert t.decompose.nll_by_mask_devices == ("cuda", "cpu")
    assert t.graph_passes.conv_epilogue_dtypes == (torch.float32, torch.bfloat16)
    assert t.pointwise.small_configs == ((1, 128, 4), (2, 256, 8))
    assert set(t.changed()) == {"codegen.all_true_masks", "split.min_r", "runtime.progress_delay_seconds",
                                "decompose.nll_by_mask_devices", "graph_passes.conv_epilogue_dtypes",
                                "pointwise.small_configs"}
    # typed values pass through as they are; the original is unchanged (frozen)
    u = Tuning().replace("persistent.writing_rows_xblock", 2)
    assert u.persistent.writing_rows_xblock == 2 and Tuning().persistent.writing_rows_xblock == 1
    assert u != Tuning() and hash(u) != hash(Tuning()) and Tuning() == Tuning()
    with pytest.raises(dataclasses.FrozenInstanceError):
        u.persistent.tile_elements = 1


@pytest.mark.parametrize("assignment, error, words", [
    ("split.minr=3", KeyError, ["split.minr", "min_r", "interpret_min_r"]),
    ("splits.min_r=3", KeyError, ["splits", "inner_outer", "codegen"]),
    ("split.min_r=many", ValueError, ["split.min_r", "is not an int"]),
    ("split.min_r=2.5", ValueError, ["split.min_r", "'2.5' is not an int"]),
    ("split.min_r=True", ValueError, ["split.min_r", "is not an int"]),
    ("codegen.sink_selects=maybe", ValueError, ["codegen.sink_selects", "bool"]),
    ("split.min_r", ValueError, ["section.field=value"]),
    ("graph_passes.conv_epilogue_dtypes=float99", ValueError, ["conv_epilogue_dtypes", "dtype"]),
    ("pointwise.small_configs=((1, 2),)", ValueError, ["small_configs"]),
    ("segment.remat_max_ops=-1", ValueError, ["segment.remat_max_ops", "-1 is negative"]),
    ("pointwise.small_configs=((1, -256, 8),)", ValueError, ["small_configs", "holds a negative number"]),
    ("persistent.tile_elements=3000", ValueError, ["persistent.tile_elements", "3000 is not a power of two"]),
    ("outer.warps=0", ValueError, ["outer.warps", "0 is not a power of two"]),
    ("looped.rblock=-4", ValueError, ["looped.rblock", "negative"]),
    ("persistent.elements_per_thread=0", ValueError, ["persistent.elements_per_thread", "0 is not positive"]),
])
def test_bad_assignments_name_the_field_and_the_known_ones(assignment, error, words):
    """A wrong path raises a KeyError (an ``UnknownTuningField``) listing the known names,
    printed without quotes; a value that does not convert raises a ValueError: an int field
    takes integers only, never cutting ``2.5`` to 2."""
    with pytest.raises(error) as info:
        parse_tuning(assignment)
    assert all(w in str(info.value) for w in words), str(info.value)
    assert not str(info.value).startswith(("'", '"'))


def test_launch_sizes_are_powers_of_two_by_default_and_other_ints_may_be_zero():
    """The fields the range check takes for block sizes, tiles and warp counts have
    power-of-two defaults (so the rule fits them all), and 0 stays valid where it means
    something: ``runtime.pool_output_bytes=0`` copies every output."""
    from torchfuse.config.tuning import is_launch_size

    sizes = [p for p in tuning_fields() if is_launch_size(p)]
    assert "persistent.tile_elements" in sizes and "inner_outer.warps" in sizes
    assert "inner_outer.interpret_blocks" not in sizes  # a count of blocks, not a block
    t = Tuning()
    for path in sizes:
        section, field = path.split(".")
        v = getattr(getattr(t, section), field)
        assert v >= 1 and v & (v - 1) == 0, path
        assert parse_tuning(f"{path}={2 * v}").changed() == {path: 2 * v}
    assert parse_tuning("runtime.pool_output_bytes=0").runtime.pool_output_bytes == 0


def test_every_field_has_a_documented_default_that_round_trips():
    """Each field is listed in its section's docstring, and its default written as text parses
    back to itself."""
    fields = tuning_fields()
    assert len(fields) == len(set(fields)) >= 50
    t = Tuning()
    for path in fields:
        section, name = path.split(".")
        doc = type(getattr(t, section)).__doc__
        assert f"{name}:" in doc, path
        value = getattr(getattr(t, section), name)
        text = str(value).replace("torch.", "") if not isinstance(value, tuple) or not value or \
            not isinstance(value[0], torch.dtype) else ",".join(str(v).replace("torch.", "") for v in value)
        assert t.replace(path, text) == t, path


def test_options_take_tuning_as_text_dict_or_environment(monkeypatch):
    assert Options(tuning="split.min_r=5").tuning.split.min_r == 5
    assert Options(tuning={"split.min_r": 6}).tuning.split.min_r == 6
    nested = Options(tuning={"split": {"min_r": 7}, "looped.rblock": 1024}).tuning
    assert (nested.split.min_r, nested.looped.rblock) == (7, 1024)
    with pytest.raises(KeyError, match="unknown tuning field 'split.nope'; split has: "):
        Options(tuning={"split": {"nope": 1}})
    with pytest.raises(TypeError):
        Options(tuning=5)
    monkeypatch.setenv("TORCHFUSE_TUNING", "looped.rblock=2048")
    assert Options().tuning.looped.rblock == 2048
    assert Options(tuning=Tuning()).tuning == Tuning()  # an explicit value wins
    # a bad value names the variable it came from
    monkeypatch.setenv("TORCHFUSE_TUNING", "looped.rblock=abc")
    with pytest.raises(ValueError, match=r"^TORCHFUSE_TUNING='looped.rblock=abc': tuning field looped.rblock"):
        Options()
    monkeypatch.setenv("TORCHFUSE_TUNING", "looped.nope=1")
    with pytest.raises(KeyError, match=r"^TORCHFUSE_TUNING='looped.nope=1': unknown tuning field 'looped.nope'"):
        Options()
    monkeypatch.delenv("TORCHFUSE_TUNING")
    monkeypatch.setenv("TORCHFUSE_LAUNCH_CONFIGS_FOR_SM_COUNT", "132")
    assert Options().launch_configs_for_sm_count == 132
    with pytest.raises(ValueError):
        Options(launch_configs_for_sm_count=-1)


def _ln(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b)


def _schedulers_of_last(graphs: int = 2) -> set[str]:
    return {p.config.scheduler for cg in backend.RECENT[-graphs:] for s in cg.steps if hasattr(s, "plans")
            for p in s.plans.values()}


def test_inner_outer_max_row_reaches_the_pairing():
    """``inner_outer.max_row`` decides which LayerNorm backwards pair their row and column
    reductions: rows of 100 pair by default and do not with a limit of 64; gradients equal
    eager's either way."""
    x = torch.randn(37, 100, device=DEVICE, requires_grad=True)
    w = torch.randn(100, device=DEVICE, requires_grad=True)
    b = torch.randn(100, device=DEVICE, requires_grad=True)
    dy = torch.randn(37, 100, device=DEVICE)
    want = torch.autograd.grad(_ln(x, w, b), (x, w, b), dy)
    for limit, paired in ((4096, True), (64, False)):
        torch._dynamo.reset()
        fn = torchfuse.compile(_ln, dynamic=False, tuning=f"inner_outer.max_row={limit}")
        got = torch.autograd.grad(fn(x, w, b), (x, w, b), dy)
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
        assert ("reduction.inner_outer" in _schedulers_of_last()) == paired, limit


def test_explain_shows_the_tuning_of_each_kernel():
    """Each kernel of ``explain``'s result lists the fields of its scheduler's sections, and
    the summary names the fields changed from the defaults."""
    x = torch.randn(8, 300, device=DEVICE)
    f = lambda t: torch.softmax(t, -1)  # noqa: E731
    result = torchfuse.explain(f, x, tuning="persistent.tile_elements=2048, segment.remat_max_ops=3")
    (kernel,) = result.kernels
    assert kernel.scheduler == "reduction.persistent"
    assert "persistent.tile_elements = 2048  (changed)" in kernel.tuning
    assert "persistent.one_warp_row = 1024" in kernel.tuning  # a default of its section
    assert "segment.remat_max_ops = 3  (changed)" in kernel.tuning  # changed elsewhere
    assert not any(line.startswith("split.") for line in kernel.tuning)
    text = result.summary()
    assert "tuning changed from the defaults: persistent.tile_elements = 2048; segment.remat_max_ops = 3" in text
    assert "tuning changed" not in torchfuse.explain(f, x).summary()
