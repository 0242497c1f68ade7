"""The `ember` command: `ember demo` (the talk's toy example) and `ember bench` (benchmarks).

Both run scripts from the repository checkout that ember was installed from (editable install).
"""
from __future__ import annotations

import argparse
import os
import runpy
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = ("overhead.py", "capture_counts.py")


def _script(*parts: str) -> str:
    path = os.path.join(REPO, *parts)
    if not os.path.exists(path):
        raise SystemExit(f"ember: {path} not found; run from a checkout installed with `pip install -e .`")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ember", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="capture the PyTorch 2 talk's toy example and explain it")
    bench = commands.add_parser("bench", help="run the benchmarks (printed numbers, tables in benchmarks/results)")
    bench.add_argument("names", nargs="*", help=f"a subset of {', '.join(BENCHMARKS)}")
    args = parser.parse_args(argv)
    if args.command == "demo":
        runpy.run_path(_script("examples", "demo.py"), run_name="__main__")
        return 0
    status = 0
    for name in args.names or BENCHMARKS:
        print(f"== benchmarks/{name}", flush=True)
        status |= subprocess.call([sys.executable, _script("benchmarks", name)])
    return status


if __name__ == "__main__":
    sys.exit(main())
