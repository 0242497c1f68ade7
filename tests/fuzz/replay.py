"""One fuzz program through the harness, with the full trace of any failure and, with
EMBER_LOGS=output_code, the generated code: for bugs seen on another machine (the GPU).

    EMBER_FUZZ_DEVICE=cuda python3 -m tests.fuzz.replay --backend ember --mode default 90 1076
"""
from __future__ import annotations

import argparse
import os
import sys


def seed_groups(groups):
    """(mode, seed) for arguments like "conv:705081,705295 stats:704921" (the GPU scripts' form)."""
    for group in groups:
        mode, seeds = group.split(":")
        for seed in seeds.split(","):
            yield mode, int(seed)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("seeds", nargs="+", type=int)
    parser.add_argument("--mode", default="default")
    parser.add_argument("--backend", default="ember")
    arguments = parser.parse_args()
    if "_triton" in arguments.backend and os.environ.get("EMBER_FUZZ_DEVICE", "cpu") == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from .generator import generate
    from .harness import run_program

    for seed in arguments.seeds:
        for outcome in run_program(generate(seed, arguments.mode), (arguments.backend,)):
            print(f"== seed {seed} {arguments.mode} {outcome.backend}: {outcome.cls} {outcome.check or ''}")
            print(outcome.detail or outcome.exception or "")
            if outcome.trace:
                print(outcome.trace)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
