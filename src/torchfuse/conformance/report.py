"""The conformance table: op x dtype -> verdict, as JSON and as Markdown, and merging shards.

Takes the verdicts of a run (``{op: {dtype: Verdict}}``) and what the run was (command,
versions, device, how much of the op database it covered); writes ``table.json`` (the data,
readable back by :func:`read_json` and :func:`merge`) and ``table.md`` (the command in its
header, counts, one row per op with one column per dtype, then every fail and why each
``aten`` entry ran through ATen).
"""
from __future__ import annotations

import collections
import json
from pathlib import Path
from .catalog import DTYPE_NAMES
from .classify import STATUSES, Verdict

Table = dict  # {op: {dtype name: Verdict}}

_CELL = {"pass": "pass", "aten": "aten", "fail": "**FAIL**", "skipped": "skip"}


def counts(table: Table) -> dict[str, int]:
    c = collections.Counter(v.status for row in table.values() for v in row.values())
    return {s: c.get(s, 0) for s in STATUSES}


def to_json(table: Table, meta: dict) -> dict:
    return {"meta": meta, "counts": counts(table),
            "results": {op: {dt: v.to_json() for dt, v in row.items()} for op, row in sorted(table.items())}}


def read_json(path: str | Path) -> tuple[Table, dict]:
    data = json.loads(Path(path).read_text())
    table = {op: {dt: Verdict.from_json(v) for dt, v in row.items()} for op, row in data["results"].items()}
    return table, data.get("meta", {})


def merge(parts: list[tuple[Table, dict]]) -> tuple[Table, dict]:
    """One table from shards (a later part wins for an (op, dtype) present twice, so a re-run
    of some ops or dtypes merged last replaces their earlier verdicts); ``meta`` from the
    first, with the shards' commands, op lists and seconds combined."""
    table: Table = {}
    meta: dict = dict(parts[0][1]) if parts else {}
    not_run: set[str] = set()
    seconds = 0.0
    for t, m in parts:
        for op, row in t.items():
            table.setdefault(op, {}).update(row)
        not_run |= set(m.get("not_run", []))
        seconds += float(m.get("seconds", 0.0))
    commits = [c for _, m in parts for c in (m.get("commits") or [m.get("commit")]) if c]
    if commits:
        meta["commits"] = list(dict.fromkeys(commits))
    stopped = [s for _, m in parts for s in (m.get("stops") or [m.get("stopped")]) if s]
    meta.pop("stopped", None)
    if stopped:
        meta["stops"] = stopped
    meta["not_run"] = sorted(not_run - set(table))
    meta["seconds"] = round(seconds, 1)
    meta["shards"] = [m.get("shard") for _, m in parts]
    commands = [c for _, m in parts for c in (m.get("commands") or [m.get("command")]) if c]
    meta["commands"] = list(dict.fromkeys(commands))
    return table, meta


def _dtype_columns(table: Table) -> list[str]:
    present = {dt for row in table.values() for dt in row}
    order = list(DTYPE_NAMES)
    return [d for d in order if d in present] + sorted(present - set(order))


def to_markdown(table: Table, meta: dict) -> str:
    """The table as Markdown (see the module doc)."""
    c = counts(table)
    cols = _dtype_columns(table)
    lines = ["# torchfuse conformance: PyTorch's OpInfo database", ""]
    commands = meta.get("commands") or ([meta["command"]] if meta.get("command") else [])
    if commands:
        lines += ["Produced by:", "", "```", *commands, "```", ""]
    env = ", ".join(f"{k} {meta[k]}" for k in ("torch", "triton", "device", "gpu", "mode") if meta.get(k))
    if env:
        lines += [f"Environment: {env}.", ""]
    commits = meta.get("commits") or ([meta["commit"]] if meta.get("commit") else [])
    if commits:
        lines += [f"torchfuse commit{'s' if len(commits) > 1 else ''} tested: "
                  + ", ".join(f"`{c}`" for c in commits) + " (`+`: with changes under src/ not yet committed).", ""]
    for stop in meta.get("stops") or ([meta["stopped"]] if meta.get("stopped") else []):
        lines += [f"A run stopped at {_md(stop)} (a CUDA error leaves the context unusable); its later ops "
                  "are listed as not run.", ""]
    lines += [
        f"Covered: {len(table)} OpInfo entries, {sum(c.values())} (op, dtype) pairs"
        + (f" in {meta['seconds']:.0f} s" if meta.get("seconds") else "")
        + (" (the runs added up)" if len(meta.get("shards") or []) > 1 else "") + ".",
        f"**{c['pass']} pass, {c['aten']} aten (ran through ATen), {c['fail']} fail, "
        f"{c['skipped']} skipped.**", ""]
    if meta.get("not_run"):
        lines += [f"Not run ({len(meta['not_run'])} entries, time budget or selection): "
                  + ", ".join(f"`{n}`" for n in meta["not_run"][:60])
                  + (" ..." if len(meta["not_run"]) > 60 else ""), ""]
    lines += [
        "Each sample runs alone and between two pointwise neighbours in one program, forward and,",
        "where the OpInfo supports gradients for the dtype, backward; it is compared with eager at",
        "the dtype's `assert_close` tolerance or the OpInfo's own larger override (a value beyond it",
        "still passes when it is no farther than eager's from the result of the program in float64:",
        "eager on a CPU rounds some fp16/bf16 intermediates that CUDA's kernels keep in fp32).",
        "`pass`: values match and a fusion group ran; `aten`: values match, everything ran through",
        "ATen (reasons below); `FAIL`: mismatch or an exception eager did not raise; `skip`: no",
        "verdict (random results, timeouts, TorchDynamo alone or with AOTAutograd's `aot_eager` backend",
        "already differing from eager); empty:",
        "the op does not support the dtype.", ""]
    lines.append("| op | " + " | ".join(cols) + " |")
    lines.append("| --- | " + " | ".join("---" for _ in cols) + " |")
    for op in sorted(table):
        row = table[op]
        cells = [_CELL[row[d].status] if d in row else "" for d in cols]
        lines.append(f"| `{op}` | " + " | ".join(cells) + " |")
    lines += ["", "## Fails", ""]
    fails = [(op, dt, v) for op in sorted(table) for dt, v in table[op].items() if v.status == "fail"]
    if not fails:
        lines.append("None.")
    for op, dt, v in fails:
        lines.append(f"- `{op}` {dt}: {_md(v.reason)}")
    lines += ["", "## Skipped", ""]
    skipped = _grouped(table, "skipped")
    lines += [f"- {_md(reason)}: {', '.join(items)}" for reason, items in skipped] or ["None."]
    lines += ["", "## Why ops ran through ATen", "",
              "Per (op, dtype) the most frequent ATen calls of its samples and why they were not fused.", ""]
    lines += [f"- {_md(reason)}: {', '.join(items)}" for reason, items in _grouped(table, "aten")] or ["None."]
    return "\n".join(lines) + "\n"


def differences(a: tuple[Table, dict], b: tuple[Table, dict], names: tuple[str, str] = ("A", "B")) -> str:
    """Markdown listing every (op, dtype) whose status differs between tables ``a`` and ``b``
    (each ``(table, meta)``), with both reasons, and the entries or dtypes only one covers."""
    (ta, ma), (tb, mb) = a, b
    label = [f"{n} ({m.get('device', '?')}{', ' + m['gpu'] if m.get('gpu') else ''})" for n, m in zip(names, (ma, mb))]
    lines = [f"# Conformance differences: {label[0]} against {label[1]}", ""]
    changed, only = [], []
    for op in sorted(set(ta) | set(tb)):
        ra, rb = ta.get(op), tb.get(op)
        if ra is None or rb is None:
            only.append(f"- `{op}`: only in {names[0] if rb is None else names[1]}")
            continue
        for dt in [d for d in DTYPE_NAMES if d in ra or d in rb] + sorted((set(ra) | set(rb)) - set(DTYPE_NAMES)):
            va, vb = ra.get(dt), rb.get(dt)
            if va is None or vb is None:
                only.append(f"- `{op}` {dt}: only in {names[0] if vb is None else names[1]}")
            elif va.status != vb.status:
                changed.append(f"- `{op}` {dt}: {_CELL[va.status]} / {_CELL[vb.status]}"
                               + (f"; {names[0]}: {_md(va.reason)}" if va.reason else "")
                               + (f"; {names[1]}: {_md(vb.reason)}" if vb.reason else ""))
    common = sum(1 for op in set(ta) & set(tb) for dt in set(ta[op]) & set(tb[op]))
    lines += [f"{common} (op, dtype) pairs in both; {len(changed)} with another verdict; "
              f"{len(only)} entries or dtypes in one table only.", "", "## Other verdicts", ""]
    lines += changed or ["None."]
    lines += ["", "## In one table only", ""]
    lines += only or ["None."]
    return "\n".join(lines) + "\n"


def _grouped(table: Table, status: str) -> list[tuple[str, list[str]]]:
    """``(reason, ["op (dtypes)", ...])`` for every verdict of ``status``, one line per reason."""
    by_reason: dict[str, dict[str, list[str]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for op in sorted(table):
        for dt, v in table[op].items():
            if v.status == status:
                by_reason[v.reason][op].append(dt)
    out = []
    for reason in sorted(by_reason, key=lambda r: (-len(by_reason[r]), r)):
        items = [f"`{op}` ({', '.join(dts)})" for op, dts in by_reason[reason].items()]
        out.append((reason, items))
    return out


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write(table: Table, meta: dict, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``table.json`` and ``table.md`` under ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / "table.json", out / "table.md"
    js.write_text(json.dumps(to_json(table, meta), indent=1, sort_keys=False) + "\n")
    md.write_text(to_markdown(table, meta))
    return js, md


def summary_line(table: Table) -> str:
    c = counts(table)
    return (f"{len(table)} ops, {sum(c.values())} (op, dtype): {c['pass']} pass, {c['aten']} aten (ran through ATen), "
            f"{c['fail']} fail, {c['skipped']} skipped")


__all__ = ["Table", "counts", "differences", "merge", "read_json", "summary_line", "to_json", "to_markdown",
           "write"]
