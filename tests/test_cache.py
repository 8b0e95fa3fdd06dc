"""The on-disk kernel cache: content-addressed text, safe against corrupt, foreign, read-only,
missing and concurrently written caches; nothing runs unless its hash matches its name."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
import torch

import torchfuse
import torchfuse.backend as backend
from torchfuse.runtime.cache import SourceStore, sha256_text
from conftest import DEVICE

TEXT = "x = 1\n"
KEY = sha256_text(TEXT)


def test_writes_and_hits(tmp_path):
    store = SourceStore(str(tmp_path))
    p = store.path_for(KEY, TEXT)
    assert p.read_text() == TEXT and p.name == f"{KEY}.py" and str(tmp_path) in str(p)
    assert (store.hits, store.misses) == (0, 1)
    assert store.path_for(KEY, TEXT) == p
    assert (store.hits, store.misses) == (1, 1)


@pytest.mark.parametrize("bad", ["", "x = 1", "import os; os.system('false')\n", "\x00\x01garbage"])
def test_corrupt_truncated_or_foreign_file_is_replaced(tmp_path, bad):
    store = SourceStore(str(tmp_path))
    path = tmp_path / "kernels" / KEY[:2] / f"{KEY}.py"
    path.parent.mkdir(parents=True)
    path.write_text(bad)
    p = store.path_for(KEY, TEXT)
    assert p.read_text() == TEXT


def test_key_must_be_the_hash_of_the_text(tmp_path):
    with pytest.raises(AssertionError):
        SourceStore(str(tmp_path)).path_for("0" * 64, TEXT)


def test_unwritable_cache_location_runs_from_a_private_dir(tmp_path):
    # a regular file where the cache directory should be: nothing can be created under it
    # (the same failure a read-only directory gives, and one that root cannot bypass)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.warns(UserWarning, match="kernel cache directory") as caught:
        p = SourceStore(str(blocker)).path_for(KEY, TEXT)
    assert p.read_text() == TEXT and str(blocker) not in str(p)
    # the warning names the directory and the reason, and says what it costs
    text = str(caught[0].message)
    assert str(blocker) in text and "Not a directory" in text and "none persists" in text, text


@pytest.mark.parametrize("where", ["file", "missing-root"])
def test_unusable_cache_directory_warns_once_per_directory(tmp_path, where, recwarn):
    """A cache directory under a file, or under a root that cannot be created (``/proc``
    refuses new entries, also to root), warns once for the process however many kernels and
    stores use it; values come from the private directory meanwhile."""
    if where == "file":
        (tmp_path / "file").write_text("x")
        root = tmp_path / "file" / "cache"
    else:
        root = Path("/proc") / f"torchfuse-cache-test-{os.getpid()}-{tmp_path.name}"
    texts = [f"x = {i}\n" for i in range(3)]
    for text in texts:  # three kernels, two stores (two graphs)
        for store in (SourceStore(str(root)), SourceStore(str(root))):
            assert store.path_for(sha256_text(text), text).read_text() == text
    mine = [w for w in recwarn.list if "kernel cache directory" in str(w.message)]
    assert len(mine) == 1 and str(root) in str(mine[0].message), [str(w.message) for w in mine]


def test_missing_cache_dir_is_created(tmp_path):
    root = tmp_path / "a" / "b" / "c"
    p = SourceStore(str(root)).path_for(KEY, TEXT)
    assert p.read_text() == TEXT and str(root) in str(p)


def test_planted_kernel_file_never_runs(tmp_path):
    """A file with the right name but other content (e.g. planted by another user) must be
    replaced before anything imports it."""
    marker = tmp_path / "executed"

    def f(x):
        return (x * 3).cos()

    x = torch.randn(64, device=DEVICE)
    cache = tmp_path / "cache"
    torchfuse.compile(f, cache_dir=str(cache))(x)
    files = list((cache / "kernels").rglob("*.py"))
    assert len(files) == 1
    files[0].write_text(f"open({str(marker)!r}, 'w').write('pwned')\n")
    torch._dynamo.reset()
    from torchfuse.runtime import compile as rc
    rc._loaded.clear()  # a new process: nothing loaded yet
    out = torchfuse.compile(f, cache_dir=str(cache))(x)
    torch.testing.assert_close(out, f(x))
    assert not marker.exists(), "a file whose hash did not match its name was executed"
    assert "@triton.jit" in files[0].read_text()


SCRIPT = textwrap.dedent("""
    import os, sys
    import torch
    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
    import torchfuse, torchfuse.backend as backend
    device = "cuda" if torch.cuda.is_available() else "cpu"
    def f(x, y):
        return torch.softmax(x * y, -1).sum(0) + y
    x = torch.randn(16, 32, device=device); y = torch.randn(32, device=device)
    out = torchfuse.compile(f, cache_dir=sys.argv[1], interpret=device == "cpu")(x, y)
    torch.testing.assert_close(out, f(x, y))
    g = backend.RECENT[-1]
    print("HITS", g.store.hits, "MISSES", g.store.misses)
""")


def _run_script(cache: Path) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(cache)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("HITS")][-1].split()
    return int(line[1]), int(line[3])


def test_second_process_hits_the_cache(tmp_path):
    hits, misses = _run_script(tmp_path)
    assert misses >= 1 and hits == 0
    hits, misses = _run_script(tmp_path)
    assert misses == 0 and hits >= 1


def test_two_processes_fill_one_cache_at_once(tmp_path):
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    for f in (tmp_path / "kernels").rglob("*.py"):
        assert sha256_text(f.read_text()) == f.stem
    assert not list((tmp_path / "kernels").rglob(".tmp-*")), "a temporary file was left behind"


def test_interpreted_kernels_leave_triton_language_unpatched():
    """Running a kernel under Triton's interpreter must leave ``triton.language`` as it found
    it: a library call inside an interpreted kernel (``tl.sum`` here) used to leave dozens of
    ``tl.core`` builtins as interpreter versions, and a CUDA kernel compiled later in the same
    process then failed in Triton's code generator and fell back to ATen."""
    import warnings

    from torchfuse.runtime.compile import _CLASS_INTERNALS, _language_namespaces

    def snapshot():  # submodules imported lazily on first use (triton.language.semantic) are no patch
        return [{k: v for k, v in vars(ns).items() if k not in _CLASS_INTERNALS and not isinstance(v, types.ModuleType)}
                for ns in _language_namespaces()]

    def f(x):
        return (x * 3).cos().sum(-1) + x.amax(-1)

    x = torch.randn(8, 64)
    before = snapshot()
    torch.testing.assert_close(torchfuse.compile(f, interpret=True)(x), f(x))
    after = snapshot()
    for b, a in zip(before, after):
        changed = sorted(k for k in set(a) | set(b) if a.get(k) is not b.get(k))
        assert not changed, changed
    if torch.cuda.is_available():  # the symptom: a fresh CUDA kernel compiles without falling back
        def g(y):
            return (y * 7).sin() - 0.25

        y = torch.randn(96, device="cuda")
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            torch.testing.assert_close(torchfuse.compile(g)(y), g(y))


def test_private_kernel_dir_is_removed_when_the_process_exits(tmp_path):
    """Without a cache, kernel sources go to a temporary directory of the process's own; it
    does not outlive the process."""
    import os
    import subprocess
    import sys

    code = ("from torchfuse.runtime.cache import SourceStore; "
            f"print(SourceStore(None).path_for({KEY!r}, {TEXT!r}).parent)")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    written = out.stdout.strip().splitlines()[-1]
    assert written.startswith(str(tmp_path)), written
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())


def test_compiling_with_an_unusable_cache_directory_warns_and_computes_eager_values(tmp_path):
    """What a user sees: ``cache_dir`` naming a file gives one warning with that path at the
    first compile, and the compiled function's values are eager's."""
    (tmp_path / "file").write_text("x")
    x = torch.randn(4, 8, device=DEVICE)

    def f(a):
        return torch.sigmoid(a) * a + 1

    with pytest.warns(UserWarning, match="kernel cache directory .*file.* cannot be used"):
        out = torchfuse.compile(f, cache_dir=str(tmp_path / "file"))(x)
    torch.testing.assert_close(out, f(x))
