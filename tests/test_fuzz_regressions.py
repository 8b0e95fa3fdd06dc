"""Programs the differential fuzzer (tests/test_fuzz.py) once reported, kept as tests.

Each was shrunk by hypothesis and pasted from its printed ``test_source``. A program may have
exposed a torchfuse bug (then fixed) or a flaw of the fuzzer's own check (then fixed in
``check_program``); either way it must keep passing.
"""
from __future__ import annotations

import torch

from test_fuzz import check_program, make_input


def test_exp_in_float32_cast_to_float64():
    """``exp`` in fp32, then a cast to fp64: torchfuse's and CPU eager's fp32 ``exp`` differ by
    one fp32 ulp, which the fuzzer compared at fp64's tolerance (found with
    ``--fuzz-examples 2000 --fuzz-seed 11``). The check now uses the tolerance of the least
    precise dtype a value passes through."""
    def program(x0, x1, x2):
        v0 = x0.abs()
        v1 = x0.abs()
        v2 = torch.exp(x0)
        v3 = v2.to(torch.float64)
        return (v3,)

    check_program(program, [make_input((1, 1), torch.float32, 'contiguous', seed=0, specials=False, grad=True),
                            make_input((1, 1), torch.float32, 'contiguous', seed=0, specials=False, grad=True),
                            make_input((1, 1), torch.float32, 'contiguous', seed=0, specials=False, grad=True)])
