"""The graph cache: a compiled graph's segmentation and kernel sources, kept for the next process.

Takes a graph about to be segmented (its ATen FX graph, its IR, the options) and gives a
:class:`PlanCache`: the partitions the segmenter settled on for that graph before (its
fusion groups, as lists of node positions: :mod:`torchfuse.segment.replay`) and the kernel
sources generated for it, by fusion group, loop layout and scheduler. A second process that
compiles the same graph with the same options then replays the partitions instead of
searching for them (the rest of segmentation, cheap, runs as usual) and skips code
generation for every group whose source is stored; Triton's own cache (``TRITON_CACHE_DIR``)
holds the compiled binaries of those sources, keyed by their text.

The key (:func:`graph_key`) is the SHA-256 of everything that decides the result: the graph's
name (forward, backward, inference), its ATen code, its inputs' shapes, strides, dtypes and
devices, its IR text, which inputs are parameters, the options that change code (all but
where files go, progress bars and compile parallelism, :data:`NOT_IN_KEY`; the heuristics'
constants are the options' ``Tuning``), the versions of torchfuse, PyTorch and Triton, a hash of torchfuse's own source files (so an edited torchfuse
never reads sources an older one generated), and the capability of each CUDA device the graph
uses. Group ids are positions in the segmentation, which the key fixes.

On disk, ``<cache_dir>/graphs/<key[:2]>/<key>.json`` holds plain JSON, never a pickle:
``{"schema", "key", "sha256", "payload"}`` where ``sha256`` is the hash of the payload's
canonical JSON and the payload is ``{"partitions": [[[int]]], "sources": {slot: source}}``.
An entry is used only when it parses, has this module's :data:`SCHEMA`, names its own key,
its payload hashes to ``sha256``, its partitions are lists of lists of ints, and every source
text hashes to its kernel key (a replayed partition is checked against the graph as well,
:func:`torchfuse.segment.replay.replay`); anything else (a truncated or edited file, another
version's entry) is ignored with a debug log, the graph is segmented and its kernels are
generated again, and the entry is rewritten. Writes go to a temporary file renamed into place,
so concurrent processes never read half an entry.

``<cache_dir>/graphs/index/<hash of the graph's name and ATen code>.json`` lists the keys
stored for one graph with a digest of each part of their key and their options and versions
(JSON, at most :attr:`PlanCache.INDEX_LIMIT` keys): a miss for a graph compiled before says
which parts changed (:func:`explain_miss`: an option, a version, the inputs' sizes...), which
``TORCHFUSE_LOGS=cache`` logs. The index only explains; an unusable one is ignored.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("torchfuse.cache")

#: version of the entry format; entries of another schema are ignored
SCHEMA = 2

#: options that do not change what is generated (where files go, progress, parallelism)
NOT_IN_KEY = frozenset({"dump_dir", "cache_dir", "progress", "compile_threads"})


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """SHA-256 over torchfuse's own ``.py`` files (path and bytes, in path order), once per
    process: a graph compiled by edited code never reads an older code's entries."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def versions() -> dict[str, str]:
    """The versions the key depends on: torchfuse, PyTorch, Triton, torchfuse's source hash."""
    import torch

    import torchfuse

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "none"
    return {"torchfuse": torchfuse.__version__, "torch": torch.__version__, "triton": triton_version,
            "source": source_hash()}


def _stable_repr(value: Any) -> str:
    """``repr`` whose text is the same in every process: sets in sorted order (their own order
    follows string hashing, which differs between processes)."""
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(_stable_repr(v) for v in value)) + "}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_stable_repr(v) for v in value) + ",)"
    return repr(value)


def _describe_input(value: Any) -> str:
    """A graph input's shape, strides, dtype, device (and whether it requires grad)."""
    import torch

    if isinstance(value, torch.Tensor):
        return (f"tensor{tuple(value.shape)}{{{tuple(value.stride())}}}:{value.dtype}@{value.device}"
                f":grad={value.requires_grad}")
    return f"{type(value).__name__}:{value}"


def _capabilities(example_inputs: list) -> list:
    import torch

    devices = sorted({str(x.device) for x in example_inputs if isinstance(x, torch.Tensor) and x.device.type == "cuda"})
    out = []
    for d in devices:
        try:
            out.append([d, list(torch.cuda.get_device_capability(torch.device(d)))])
        except Exception:  # noqa: BLE001 - no driver: the name alone
            out.append([d, None])
    return out


def key_parts(name: str, gm, ir_text: str, example_inputs: list, options, static_inputs) -> dict[str, Any]:
    """What the graph cache key hashes (see the module docstring), by part: ``schema``,
    ``name``, ``versions``, ``options``, ``static_inputs``, ``inputs``, ``example_inputs``,
    ``devices``, ``code``, ``ir``."""
    opts = {k: v for k, v in dataclasses.asdict(options).items() if k not in NOT_IN_KEY}
    placeholders = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    return {
        "schema": SCHEMA, "name": name, "versions": versions(), "options": opts,
        "static_inputs": list(static_inputs) if static_inputs is not None else None,
        "inputs": [_describe_input(v) for v in placeholders],
        "example_inputs": [_describe_input(v) for v in example_inputs],
        "devices": _capabilities(list(example_inputs)), "code": gm.code, "ir": ir_text,
    }


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=_stable_repr).encode()).hexdigest()


def key_of(parts: dict[str, Any]) -> str:
    """The graph cache key of :func:`key_parts`' result: its hex SHA-256."""
    return _digest(parts)


def graph_key(name: str, gm, ir_text: str, example_inputs: list, options, static_inputs) -> str:
    """The graph cache key (see the module docstring): hex SHA-256 of :func:`key_parts`."""
    return key_of(key_parts(name, gm, ir_text, example_inputs, options, static_inputs))


def describe_parts(parts: dict[str, Any]) -> dict[str, Any]:
    """The plain-JSON record of a key's parts that lets a later miss say what changed: each
    part's digest, and the options and versions themselves (small, and the usual causes)."""
    return {"digests": {k: _digest(v) for k, v in parts.items()},
            "options": json.loads(json.dumps(parts.get("options", {}), default=_stable_repr)),
            "versions": parts.get("versions", {})}


def _index_name(parts: dict[str, Any]) -> str:
    """The index file of every entry for one graph (its name and ATen code)."""
    return _digest([parts.get("name"), parts.get("code")])[:32] + ".json"


def explain_miss(described: dict[str, Any], index: dict[str, Any]) -> str:
    """Why a key has no entry, from the index of entries for the same graph code: nothing was
    stored for this graph, or the nearest stored key differs in these parts (with the option
    and version values that differ)."""
    if not index:
        return "no entry for this graph's code in the cache directory"
    mine = described["digests"]

    def changed(other: dict) -> list[str]:
        theirs = other.get("digests", {})
        return sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))

    nearest = min(index.values(), key=lambda o: len(changed(o)))
    parts = changed(nearest)
    details = []
    for part in ("options", "versions"):
        if part in parts:
            a, b = _flat(nearest.get(part, {})), _flat(described.get(part, {}))
            diffs = [f"{k} {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)]
            details.append(f"{part}: {', '.join(diffs[:4])}" + (", ..." if len(diffs) > 4 else ""))
    if {"inputs", "example_inputs"} & set(parts):
        details.append("inputs: their shapes, strides, dtypes or devices")
    count = f"{len(index)} entr{'y' if len(index) == 1 else 'ies'} for this graph's code"
    return f"{count}; the nearest differs in {', '.join(parts) or 'nothing'}" + (
        f" ({'; '.join(details)})" if details else "")


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested dict as ``{"a.b.c": leaf}`` (a tuning section's constants by their full names)."""
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, Any] = {}
    for k, v in value.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _payload_hash(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _verified_payload(data: Any, key: str) -> tuple[dict[str, dict], list]:
    """The sources and partitions of a parsed entry, or raise ValueError saying why the entry
    is not usable."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"schema {data.get('schema') if isinstance(data, dict) else None!r}, not {SCHEMA}")
    if data.get("key") != key:
        raise ValueError("the entry names another key")
    payload = data.get("payload")
    if not isinstance(payload, dict) or _payload_hash(payload) != data.get("sha256"):
        raise ValueError("the payload does not match its hash")
    sources = payload.get("sources")
    if not isinstance(sources, dict):
        raise ValueError("no sources")
    for slot, src in sources.items():
        text = src.get("text") if isinstance(src, dict) else None
        if not isinstance(text, str) or hashlib.sha256(text.encode()).hexdigest() != src.get("key"):
            raise ValueError(f"source {slot} does not match its kernel key")
    partitions = payload.get("partitions")
    if not (isinstance(partitions, list) and all(
            isinstance(p, list) and all(isinstance(g, list) and all(type(i) is int for i in g) for g in p)
            for p in partitions)):
        raise ValueError("partitions are not lists of lists of ints")
    return sources, partitions


class PlanCache:
    """The stored kernel sources of one graph (see the module docstring).

    Attributes:
        key: the graph's key (:func:`graph_key`).
        path: the entry's file, or ``None`` (no cache directory: nothing is read or written).
        hits: sources served from the entry; misses: sources generated and recorded.
        partitions: the segmentation's stored partitions (plain data,
            :mod:`torchfuse.segment.replay`); empty when none are stored.
        status: ``"hit"`` (a verified entry was read), ``"miss"`` (none was there),
            ``"ignored: <reason>"`` (an entry was there and was not usable), or ``"off"``.
        miss_reason: on a miss, why no entry matched (:func:`explain_miss`), also logged at
            INFO under ``torchfuse.cache`` (``TORCHFUSE_LOGS=cache``); ``None`` otherwise.
    """

    #: entries an index keeps per graph code (the newest)
    INDEX_LIMIT = 16

    def __init__(self, key: str, path: Path | None, sources: dict[str, dict], status: str,
                 partitions: list | None = None, described: dict | None = None, index_path: Path | None = None):
        self.key = key
        self.path = path
        self.described = described
        self.index_path = index_path
        self.miss_reason: str | None = None
        self.sources = sources
        self.partitions = partitions or []
        self.status = status
        self.hits = 0
        self.misses = 0
        self._dirty = False
        self._lock = threading.Lock()

    @classmethod
    def open(cls, cache_dir: str | os.PathLike | None, key: str, parts: dict[str, Any] | None = None) -> "PlanCache":
        """The entry of ``key`` under ``cache_dir``, verified; an empty cache when there is none
        or it is not usable (never raises). With ``parts`` (:func:`key_parts`), a miss says why
        (:attr:`miss_reason`) and a written entry is recorded in its graph's index."""
        if cache_dir is None:
            return cls(key, None, {}, "off")
        root = Path(cache_dir) / "graphs"
        path = root / key[:2] / f"{key}.json"
        described = describe_parts(parts) if parts is not None else None
        index_path = root / "index" / _index_name(parts) if parts is not None else None
        try:
            raw = path.read_bytes()
        except OSError:
            cache = cls(key, path, {}, "miss", described=described, index_path=index_path)
            if described is not None:
                cache.miss_reason = explain_miss(described, _read_index(index_path))
                log.info("graph cache miss %s (%s graph): %s", key[:12], parts.get("name"), cache.miss_reason)
            return cache
        try:
            sources, partitions = _verified_payload(json.loads(raw.decode()), key)
        except Exception as e:  # noqa: BLE001 - a bad entry is a miss, never an error
            log.info("graph cache entry %s ignored (%s: %s); generating its kernels again", path,
                     type(e).__name__, e)
            return cls(key, path, {}, f"ignored: {e}", described=described, index_path=index_path)
        log.info("graph cache hit %s: %d stored partition(s) (one per segmentation pass), %d kernel source(s)",
                 key[:12], len(partitions), len(sources))
        return cls(key, path, dict(sources), "hit", partitions, described=described, index_path=index_path)

    @staticmethod
    def slot(group_id: str, layout: Any, code_key: Any) -> str:
        """The entry's name of a group's kernel for one loop layout and scheduler."""
        return f"{group_id}|{layout!r}|{code_key!r}"

    def source(self, group_id: str, layout: Any, code_key: Any):
        """The stored :class:`~torchfuse.codegen.triton.KernelSource`, or ``None``."""
        from ..codegen.triton import KernelSource

        src = self.sources.get(self.slot(group_id, layout, code_key))
        if src is None:
            return None
        try:
            found = KernelSource(name=src["name"], text=src["text"], key=src["key"], params=tuple(src["params"]),
                                 stages=tuple(src["stages"]))
        except (KeyError, TypeError):
            return None
        with self._lock:
            self.hits += 1
        return found

    def record(self, group_id: str, layout: Any, code_key: Any, source) -> None:
        """Remember a newly generated source (written by :meth:`flush`)."""
        with self._lock:
            self.misses += 1
            self.sources[self.slot(group_id, layout, code_key)] = {
                "name": source.name, "text": source.text, "key": source.key, "params": list(source.params),
                "stages": list(source.stages)}
            self._dirty = True

    def record_partitions(self, partitions: list) -> None:
        """Remember the segmentation's partitions (written by :meth:`flush`) when they differ
        from the stored ones."""
        with self._lock:
            if partitions != self.partitions:
                self.partitions = partitions
                self._dirty = True

    def flush(self) -> None:
        """Write the entry when sources were recorded since the last write; a failure is
        logged, never raised (the kernel cache warns about unusable directories)."""
        with self._lock:
            if not self._dirty or self.path is None:
                return
            payload = {"partitions": list(self.partitions), "sources": dict(self.sources)}
            self._dirty = False
        data = {"schema": SCHEMA, "key": self.key, "sha256": _payload_hash(payload), "payload": payload}
        if _write_json(self.path, data) and self.index_path is not None and self.described is not None:
            index = _read_index(self.index_path)
            index.pop(self.key, None)
            index[self.key] = self.described  # the newest last
            _write_json(self.index_path, dict(list(index.items())[-self.INDEX_LIMIT:]))


def _write_json(path: Path, data: Any) -> bool:
    """Write ``data`` to ``path`` through a temporary file renamed into place; a failure is
    logged, never raised."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
        return True
    except (OSError, TypeError, ValueError) as e:
        log.debug("graph cache file %s not written (%s)", path, e)
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        return False


def _read_index(path: Path | None) -> dict[str, Any]:
    """A graph's index (stored key -> :func:`describe_parts`), empty when missing or unusable."""
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def attach(compiled, cache: PlanCache) -> None:
    """Give a :class:`~torchfuse.runtime.executor.CompiledGraph` and its group runners the
    graph's cache: each runner's kernels are looked up under its position among the graph's
    fusion groups and a fingerprint of its group's text (so that a group that differs from
    the stored one's is a miss, never a wrong kernel)."""
    from .executor import GroupRunner

    compiled.plan_cache = cache
    runners = [s for s in compiled.steps if isinstance(s, GroupRunner)]
    for i, runner in enumerate(runners):
        runner.plan_cache = cache
        runner.plan_slot = f"{i}:{hashlib.sha256(str(runner.group).encode()).hexdigest()[:16]}"
