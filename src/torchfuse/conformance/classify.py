"""Classification: from the outcomes of one (op, dtype)'s samples to one verdict.

Takes the :class:`~torchfuse.conformance.runner.SampleOutcome` list of one op and dtype;
returns a :class:`Verdict`:

``pass``      every sample matched eager (or raised eager's exception type) and at least one
              fusion group ran; a value that differs from eager passes when it is no farther
              than eager's from the float64 result (see :mod:`.runner`).
``aten``      every sample matched eager, but everything ran through ATen; the reason lists
              the ATen calls and why they were not fused (the call nodes' reasons).
``fail``      some sample's values differ from eager beyond the dtype's tolerance, or torchfuse
              raised where eager did not (or raised another exception type).
``skipped``   no verdict: the op's results are random (``skipped: random``), or every sample
              timed out, could not be run, or differs from eager under TorchDynamo alone.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Sequence

from .runner import SampleOutcome

STATUSES = ("pass", "aten", "fail", "skipped")
#: status names of older tables, read as today's
LEGACY_STATUSES = {"fallback": "aten"}


@dataclasses.dataclass
class Verdict:
    """The result of one (op, dtype).

    Attributes:
        status: one of :data:`STATUSES`.
        reason: a short explanation (empty for a plain pass).
        samples: how many samples ran (including error samples).
        backward: whether any sample compared gradients.
        seconds: total wall time.
    """

    status: str
    reason: str = ""
    samples: int = 0
    backward: bool = False
    seconds: float = 0.0

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(data: dict) -> "Verdict":
        """A verdict from :meth:`to_json`'s output (``fallback``, the older name of ``aten``, is read as ``aten``)."""
        v = Verdict(**{f.name: data[f.name] for f in dataclasses.fields(Verdict) if f.name in data})
        v.status = LEGACY_STATUSES.get(v.status, v.status)
        return v


def classify(outcomes: Sequence[SampleOutcome]) -> Verdict:
    """One verdict for the samples of one (op, dtype) (see the module doc)."""
    n = len(outcomes)
    seconds = sum(o.seconds for o in outcomes)
    backward = any(o.backward for o in outcomes)
    if not outcomes:
        return Verdict("skipped", "no samples", 0, False, seconds)
    fails = [o for o in outcomes if o.status == "fail"]
    if fails:
        extra = f" (+{len(fails) - 1} more samples)" if len(fails) > 1 else ""
        return Verdict("fail", fails[0].reason + extra, n, backward, seconds)
    ran = [o for o in outcomes if o.status != "skipped"]
    if not ran:
        return Verdict("skipped", outcomes[0].reason, n, backward, seconds)
    skipped = len(outcomes) - len(ran)
    note = f" ({skipped} of {n} samples skipped: {_first_skip(outcomes)})" if skipped else ""
    if any(o.status == "pass" for o in ran):
        by_ref = sum(o.by_reference for o in ran)
        if by_ref:
            note = (f"{by_ref} of {n} samples differ from eager but are no farther than eager from "
                    f"float64;" + note)
        return Verdict("pass", note.strip(" ;"), n, backward, seconds)
    if all(o.status == "raises" for o in ran):
        return Verdict("pass", "raises eager's exceptions" + note, n, backward, seconds)
    return Verdict("aten", aten_reason(ran) + note, n, backward, seconds)


def _first_skip(outcomes: Sequence[SampleOutcome]) -> str:
    return next(o.reason for o in outcomes if o.status == "skipped")


def aten_reason(outcomes: Sequence[SampleOutcome], limit: int = 3) -> str:
    """The most frequent ATen-call reasons of ``outcomes``, most frequent first."""
    counts = collections.Counter(r for o in outcomes for r in o.aten_reasons)
    if not counts:
        return "nothing to compute (views only)"
    top = [r for r, _ in counts.most_common(limit)]
    more = len(counts) - len(top)
    return "; ".join(top) + (f"; +{more} more" if more > 0 else "")
