"""CLI: ``python -m scrapy_politeness._sitefarm serve --spec SPEC.json``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from scrapy_politeness._sitefarm.server import serve
from scrapy_politeness._sitefarm.spec import SpecError, parse_spec


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run the farm until stopped."""
    parser = argparse.ArgumentParser(prog="python -m scrapy_politeness._sitefarm")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_cmd = sub.add_parser("serve", help="run the farm; prints one JSON ready line")
    serve_cmd.add_argument("--spec", required=True, help="path to the spec JSON file")
    serve_cmd.add_argument(
        "--no-stdin-watch",
        action="store_true",
        help="do not exit on stdin EOF (for running by hand with stdin=/dev/null)",
    )
    args = parser.parse_args(argv)
    try:
        with open(args.spec, encoding="utf-8") as fh:
            spec = parse_spec(json.load(fh))
    except (OSError, ValueError, SpecError) as exc:
        print(f"sitefarm: bad spec {args.spec}: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(spec, watch_stdin=not args.no_stdin_watch))
    except OSError as exc:
        print(f"sitefarm: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
