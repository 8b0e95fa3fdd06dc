"""``torchfuse report``: render a saved explain result as HTML, or print its summary.

Usage::

    torchfuse report result.json [-o report.html] [--summary]

``result.json`` is what ``torchfuse.explain(...).save(path)`` wrote. Without ``-o`` the page
goes next to it (``result.html``); ``-o`` names the page, or a folder to put it in. Exit status
2 when the result cannot be read or the page cannot be written.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from .result import ExplainResult


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torchfuse report", description=__doc__.split("\n\n")[0])
    parser.add_argument("result", help="a saved explain result (JSON, from ExplainResult.save)")
    parser.add_argument("-o", "--output", help="the HTML page, or a folder for it (default: next to the result)")
    parser.add_argument("--summary", action="store_true", help="also print the text summary")
    args = parser.parse_args(argv)
    try:
        result = ExplainResult.load(args.result)
    except (OSError, ValueError, TypeError, KeyError, json.JSONDecodeError) as e:
        print(f"torchfuse report: cannot read {args.result}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    output = args.output or os.path.splitext(args.result)[0] + ".html"
    if os.path.isdir(output):  # a folder given for the page: the page goes in it
        output = os.path.join(output, os.path.splitext(os.path.basename(args.result))[0] + ".html")
    if args.summary:
        print(result.summary())
    try:
        result.write_html(output)
    except OSError as e:
        print(f"torchfuse report: cannot write {output}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    print(f"torchfuse report: wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
