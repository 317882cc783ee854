"""Command line: ``python -m scrapy_politeness plot|farm``.

``plot trace.jsonl -o timeline.png`` draws the timeline of a decision trace
written with ``POLITENESS_TRACE`` (docs/usage/observability.md). Needs
matplotlib: ``pip install matplotlib`` (the ``[plot]`` extra); without it the command
says so and exits with 2. A file that is not a trace exits with 1.

``farm`` starts the demo site farm on loopback and prints how to crawl it
(docs/getting-started.md).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["main"]

MISSING_MATPLOTLIB = ("scrapy_politeness plot needs matplotlib, which is not installed: "
                      "pip install matplotlib (the [plot] extra of scrapy-politeness)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scrapy_politeness")
    sub = parser.add_subparsers(dest="command", required=True)
    plot = sub.add_parser("plot", help="draw the timeline of a POLITENESS_TRACE file",
                          description="Draw the timeline of a POLITENESS_TRACE file as a PNG "
                                      "and print the path of the picture.")
    plot.add_argument("trace", help="the trace (JSON lines) written by POLITENESS_TRACE")
    plot.add_argument("-o", "--output", default="timeline.png",
                      help="PNG to write (default: timeline.png in the current directory)")
    plot.add_argument("-n", "--hosts", type=int, default=8,
                      help="hosts to draw, those with the most requests (default 8)")
    plot.add_argument("--width", type=int, default=1200, help="pixels (default 1200)")
    plot.add_argument("--height", type=int, default=800, help="pixels (default 800)")
    plot.add_argument("--dpi", type=int, default=100, help="dots per inch (default 100)")
    plot.add_argument("--title", default=None)
    from scrapy_politeness._sitefarm.command import add_parser

    add_parser(sub)
    return parser


def _not_a_trace(records: list[dict[str, Any]]) -> str | None:
    """Why ``records`` cannot be drawn, or None: a blank picture helps nobody."""
    if not records:
        return "it is empty"
    if records[0].get("type") != "header":
        return "it does not start with a trace header line (is it a POLITENESS_TRACE file?)"
    if not any(r.get("type") == "dispatch" for r in records):
        return "it records no request (the crawl sent none)"
    return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "farm":
        from scrapy_politeness._sitefarm.command import run

        return run(args)
    if args.hosts < 1 or args.width < 16 or args.height < 16 or args.dpi < 1:
        print("--hosts must be >= 1, --width/--height >= 16, --dpi >= 1", file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(MISSING_MATPLOTLIB, file=sys.stderr)
        return 2
    from scrapy_politeness.observe.plot import read_trace, render, series

    try:
        records = read_trace(args.trace)
    except (OSError, ValueError) as exc:
        print(f"cannot read the trace: {exc}", file=sys.stderr)
        return 1
    problem = _not_a_trace(records)
    if problem is not None:
        print(f"cannot draw {args.trace}: {problem}", file=sys.stderr)
        return 1
    data = series(records, top=args.hosts)
    path = render(data, args.output, width=args.width, height=args.height, dpi=args.dpi,
                  title=args.title)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
