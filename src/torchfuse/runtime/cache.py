"""The kernel cache: generated sources by content hash, in memory and on disk.

A kernel's cache key is the SHA-256 of its generated source text. The source is generated
from exactly what changes the code (the group's ops and dtypes, the rank and stride classes of
its loops, which dims broadcast, 64-bit indexing, the scheduler kind) and nothing else, so
equal keys mean the same kernel, and sizes never enter it. Triton's own cache, keyed by the
same source, holds the compiled binaries; a second process that generates the same source
finds both.

On disk (``<cache_dir>/kernels/<key[:2]>/<key>.py``) there is only text: nothing is
unpickled, and a file is imported only after its content hashes to the key in its name. A
corrupt, truncated or foreign file is replaced; a directory that cannot be created or written
(a file in its place, no permission) makes the cache run from a private temporary directory
instead, with one warning per directory naming it and the reason. Writes go to a temporary file renamed
into place, so concurrent processes filling one cache never see half a file.
"""
from __future__ import annotations

import atexit
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path

from .warn import user_stacklevel

log = logging.getLogger("torchfuse.cache")

_private_dir: Path | None = None
_private_lock = threading.Lock()


def _private() -> Path:
    """The process's temporary directory for kernel sources when there is no cache (Triton
    imports a kernel from a file); removed when the process exits."""
    global _private_dir
    with _private_lock:
        if _private_dir is None:
            _private_dir = Path(tempfile.mkdtemp(prefix="torchfuse-kernels-"))
            atexit.register(shutil.rmtree, _private_dir, ignore_errors=True)
        return _private_dir


def sha256_text(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8: a kernel source's cache key."""
    return hashlib.sha256(text.encode()).hexdigest()


def _file_matches(path: Path, key: str) -> bool:
    """The bytes of ``path`` hash to ``key``. Hashes raw bytes, so a file that is not UTF-8
    (truncated, overwritten by other data) is a mismatch, never a decode error."""
    return hashlib.sha256(path.read_bytes()).hexdigest() == key


class SourceStore:
    """Kernel sources on disk, addressed by content hash.

    Args:
        root: the cache directory, or ``None`` to keep sources in a private temporary dir.
    """

    def __init__(self, root: str | None):
        self.root = Path(root) / "kernels" if root else None
        self.hits = 0
        self.misses = 0

    def _dir(self, key: str, root: Path) -> Path:
        return root / key[:2]

    def path_for(self, key: str, text: str) -> Path:
        """A file holding exactly ``text`` whose name is ``key``; writes it if needed.

        Never raises for cache-directory problems: falls back to a private directory.
        """
        assert sha256_text(text) == key, "cache key must be the hash of the source"
        for root in ([self.root] if self.root is not None else []) + [_private()]:
            path = self._dir(key, root) / f"{key}.py"
            try:
                if path.is_file():
                    if _file_matches(path, key):
                        self.hits += 1
                        log.info("kernel cache hit %s", key[:12])
                        return path
                    log.warning("kernel cache file %s does not match its hash; rewriting it", path)
                self.misses += 1
                log.info("kernel cache miss %s: writing %s", key[:12], path)
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".py")
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                os.replace(tmp, path)
                if not _file_matches(path, key):  # another writer raced us with bad data
                    raise OSError("content changed while writing")
                return path
            except OSError as e:
                log.info("kernel cache at %s unusable (%s); trying the next location", root, e)
                if self.root is not None and root == self.root:
                    warn_unusable(self.root.parent, e)
                    self.root = None  # this store's later kernels go straight to the private directory
                continue
        raise OSError("no writable location for kernel sources")


_warned_roots: set[str] = set()


def warn_unusable(cache_dir: Path, error: OSError) -> None:
    """Warn once per process and directory that the kernel cache cannot be used there: kernels
    still compile and run, from a temporary directory, but nothing persists to the next process."""
    if str(cache_dir) in _warned_roots:
        return
    _warned_roots.add(str(cache_dir))
    reason = f"{type(error).__name__}: {error.strerror or error}" if isinstance(error, OSError) else str(error)
    if isinstance(error, OSError) and error.filename and str(error.filename) != str(cache_dir):
        reason += f" ({error.filename})"
    warnings.warn(f"torchfuse: the kernel cache directory {cache_dir} cannot be used ({reason}); kernels go to a "
                  "temporary directory removed when the process exits, so none persists. Set TORCHFUSE_CACHE_DIR "
                  "(or the cache_dir option) to a writable directory, or cache_dir=None to run without a cache. "
                  "This warning is shown once per directory.", UserWarning, stacklevel=user_stacklevel())
