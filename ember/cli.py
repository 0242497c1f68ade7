"""The `ember` command: `ember demo` (the talk's toy example) and `ember bench` (benchmarks).

Both run scripts from the repository checkout that ember was installed from (editable install).
`ember bench` writes its tables to `--out DIR` (default ./ember-bench-results in the current
directory), never into the checkout: the committed tables change only with
`--out benchmarks/results`.
"""
from __future__ import annotations

import argparse
import os
import runpy
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = ("overhead.py", "capture_counts.py")
DEFAULT_BENCH_OUT = "ember-bench-results"


def _script(*parts: str) -> str:
    path = os.path.join(REPO, *parts)
    if not os.path.exists(path):
        raise SystemExit(f"ember: {path} not found; run from a checkout installed with `pip install -e .`")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ember", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="capture the PyTorch 2 talk's toy example and explain it")
    bench = commands.add_parser("bench", help="run the benchmarks (printed numbers, tables in --out DIR)")
    bench.add_argument("names", nargs="*", help=f"a subset of {', '.join(BENCHMARKS)}")
    bench.add_argument("--out", default=DEFAULT_BENCH_OUT, metavar="DIR",
                       help=f"folder for the result tables (default: ./{DEFAULT_BENCH_OUT}; "
                            f"--out benchmarks/results rewrites the committed tables)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        runpy.run_path(_script("examples", "demo.py"), run_name="__main__")
        return 0
    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    out = os.path.abspath(os.path.expanduser(args.out))
    os.makedirs(out, exist_ok=True)
    status = 0
    for name in args.names or BENCHMARKS:
        print(f"== benchmarks/{name} -> {out}", flush=True)
        status |= subprocess.call([sys.executable, _script("benchmarks", name), "--out", out])
    return status


if __name__ == "__main__":
    sys.exit(main())
