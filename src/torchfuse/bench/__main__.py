"""``python -m torchfuse.bench``: the benchmark harness's command line (see :mod:`.cli`)."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``torchfuse bench`` and ``python -m torchfuse.bench``; returns the exit status."""
    from .cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
