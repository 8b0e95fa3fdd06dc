"""Habits of the codebase, checked in CI: module sizes, no module-level switches outside the
typed configuration, and the size of the registry and of the configuration (printed, so a
change shows in the log).

Run with ``-s`` to see the report: ``pytest -s tests/test_codebase.py``.
"""
from __future__ import annotations

import ast
import dataclasses
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "torchfuse"
#: a module past this many lines is listed (split it by concept when it is next changed)
SOFT_CAP = 600
#: no module may be longer
HARD_CAP = 1000
#: the tools around the compiler: their module-level numbers are presentation and run limits,
#: not heuristics
TOOLS = ("bench", "report", "conformance", "cli.py", "demo.py")
#: module-level numbers of the compiler that are constants, not switches: ``path:NAME`` -> why
NUMBERS_ALLOWED = {
    "backend.py:_MAX_RECENT": "how many compiled graphs the report can list, not a heuristic",
    "decompose.py:MM_ALIGN": "cuBLAS's tensor-core alignment, 16 bytes = 8 fp16/bf16 elements "
                             "(cuBLAS documentation, 'Tensor Core Usage')",
    "runtime/plan_cache.py:SCHEMA": "the graph cache's file format version, not a heuristic",
}


def _modules() -> list[pathlib.Path]:
    return sorted(SRC.rglob("*.py"))


def _lines(path: pathlib.Path) -> int:
    return len(path.read_text().splitlines())


def test_module_sizes():
    """Lists modules over the soft cap; fails on any over the hard cap."""
    sizes = {p.relative_to(SRC).as_posix(): _lines(p) for p in _modules()}
    over = sorted(((n, name) for name, n in sizes.items() if n > SOFT_CAP), reverse=True)
    listing = "".join(f"\n  {n:5d} {name}" for n, name in over) if over else " none"
    print(f"\n{len(sizes)} modules under src/torchfuse, {sum(sizes.values())} lines; over {SOFT_CAP} lines:{listing}")
    too_long = [name for n, name in over if n > HARD_CAP]
    assert not too_long, f"modules over {HARD_CAP} lines (split them by concept): {too_long}"


def _module_level_constants(path: pathlib.Path):
    """``(name, value node, line)`` of each module-level assignment to an UPPER_CASE name."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id.lstrip("_").isupper():
                yield target.id, value, node.lineno


def _literal(value: ast.AST):
    """The bool or number a literal (``True``, ``-3``, ``1 << 14``, ``2 ** 10``) stands for, or
    ``None`` when ``value`` is anything else."""
    try:
        result = ast.literal_eval(value)
    except ValueError:
        if not (isinstance(value, ast.BinOp) and isinstance(value.left, ast.Constant)
                and isinstance(value.right, ast.Constant)):
            return None
        result = eval(compile(ast.Expression(value), "<constant>", "eval"))  # two literals, one operator
    return result if isinstance(result, (bool, int, float)) else None


def switches(root: pathlib.Path = SRC) -> list[str]:
    """Module-level UPPER_CASE names bound to a bool literal anywhere outside ``config/``, or to a
    number in the compiler (not its tools) and not in :data:`NUMBERS_ALLOWED`:
    ``path:line NAME = value`` each."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("config/"):
            continue
        tool = rel.split("/")[0] in TOOLS
        for name, value, line in _module_level_constants(path):
            literal = _literal(value)
            if literal is None:
                continue
            if isinstance(literal, bool) or (not tool and f"{rel}:{name}" not in NUMBERS_ALLOWED):
                found.append(f"{rel}:{line} {name} = {ast.unparse(value)}")
    return found


def test_no_module_level_switches_outside_the_configuration():
    """Tunables and switches are fields of ``Options`` or ``Tuning`` (config/), passed down the
    pipeline, never module globals set from outside."""
    found = switches()
    assert not found, ("module-level switches or tunables (make them Tuning or Options fields; a true "
                       f"constant with a source goes into NUMBERS_ALLOWED with its reason): {found}")


def test_the_switch_check_finds_switches(tmp_path):
    """The check above can fail: it finds a bool switch in any module and an unlisted number in
    a compiler module, and leaves config/, tools' numbers and other values alone."""
    (tmp_path / "config").mkdir()
    (tmp_path / "bench").mkdir()
    (tmp_path / "codegen.py").write_text("FAST = True\nBLOCK: int = 1 << 10\nNAMES = ('a',)\nlower = 3\n")
    (tmp_path / "config" / "tuning.py").write_text("SWITCH = False\n")
    (tmp_path / "bench" / "runner.py").write_text("ITERS = 20\nDEBUG = False\n")
    assert switches(tmp_path) == ["bench/runner.py:2 DEBUG = False", "codegen.py:1 FAST = True",
                                  "codegen.py:2 BLOCK = 1 << 10"]


def test_counts_of_ops_options_and_tuning_fields():
    """Prints how many ops the registry has (by kind), and how many Options and Tuning fields."""
    from torchfuse import Options
    from torchfuse.config.tuning import tuning_fields
    from torchfuse.ir.ops import REGISTRY

    kinds: dict[str, int] = {}
    for opdef in REGISTRY.values():
        kinds[opdef.kind] = kinds.get(opdef.kind, 0) + 1
    options = [f.name for f in dataclasses.fields(Options)]
    fields = tuning_fields()
    print(f"\nops: {len(REGISTRY)} ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}); "
          f"options: {len(options)}; tuning fields: {len(fields)} in "
          f"{len({f.split('.')[0] for f in fields})} sections")
    assert len(REGISTRY) == sum(kinds.values()) > 0 and options and fields
    assert len(set(fields)) == len(fields)

