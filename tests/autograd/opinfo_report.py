"""The OpInfo sweep as a report: pass rates per dtype and direction on one device, and every
failing op with its reason (issue 10, acceptance 2: on CUDA with backend "ember", float32 and
bfloat16, forward and backward, at least 95%).

    python3 -m tests.autograd.opinfo_report --device cuda --dtypes float32,bfloat16 --backend ember \\
        --out benchmarks/results/opinfo_cuda.md [--limit 50]

Rates count the ops the sweep could run (an op eager refuses, or without a sample in the dtype,
is "n/a" and left out).  On a GPU, an op whose eager kernel asserts on the device ends the
process's CUDA context: the report then stops there and says so.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import os
import sys
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtypes", default="float32")
    parser.add_argument("--backend", default="ember")
    parser.add_argument("--kinds", default="forward,backward")
    parser.add_argument("--limit", type=int, default=0, help="only the first N ops (a quick look)")
    parser.add_argument("--out", default="")
    arguments = parser.parse_args()
    sys.path.insert(0, os.path.dirname(__file__))
    import opinfo_sweep
    from torch.testing._internal.common_methods_invocations import op_db

    ops = op_db[:arguments.limit] if arguments.limit else op_db
    opinfo_sweep.DEVICE[0] = arguments.device
    lines = [f"# OpInfo sweep: backend {arguments.backend} on {arguments.device} ({datetime.date.today()}, "
             f"torch {torch.__version__})", "", "| dtype | direction | pass | fail | n/a | pass rate |",
             "|---|---|---:|---:|---:|---:|"]
    failures = []
    passed: dict = collections.defaultdict(set)  # (dtype, kind) -> ops that passed
    started = time.perf_counter()
    for dtype_name in arguments.dtypes.split(","):
        opinfo_sweep.DTYPE[0] = getattr(torch, dtype_name)
        for kind in arguments.kinds.split(","):
            counts = collections.Counter()
            for op in ops:
                name = f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
                result = opinfo_sweep.outcome(op, kind, arguments.backend)
                if result not in ("pass", "n/a"):
                    failures.append((dtype_name, kind, name, result))
                    if "device-side assert" in result or "CUDA error" in result:
                        lines.append(f"\nStopped at {name} ({dtype_name} {kind}): {result}")
                        counts["fail"] += 1
                        break
                counts[result if result in ("pass", "n/a") else "fail"] += 1
                if result == "pass":
                    passed[(dtype_name, kind)].add(name)
            ran = counts["pass"] + counts["fail"]
            rate = counts["pass"] / ran if ran else 0.0
            lines.append(f"| {dtype_name} | {kind} | {counts['pass']} | {counts['fail']} | {counts['n/a']} | "
                         f"{rate:.1%} |")
            print(lines[-1], f"({time.perf_counter() - started:.0f} s)", flush=True)
    lines += ["", "| dtype | direction | op | reason |", "|---|---|---|---|"]
    lines += [f"| {d} | {k} | {n} | {r.replace('|', '/')} |" for d, k, n, r in failures]
    verdict = _against_expected(arguments.device, failures, passed)
    lines += verdict
    text = "\n".join(lines) + "\n"
    if arguments.out:
        with open(arguments.out, "w") as handle:
            handle.write(text)
    print(text[:3000])
    print("\n".join(verdict))
    if any(line.startswith("Unexpected failure") for line in verdict):
        sys.exit(1)


def _against_expected(device: str, failures: list, passed: dict) -> list[str]:
    """The run against the expected-failures list of this torch version (CUDA only)."""
    if device != "cuda":
        return []
    from opinfo_expected_failures_cuda import expected_failures

    lines = [""]
    for key in sorted({(d, k) for d, k, _, _ in failures} | set(passed)):
        expected = expected_failures(torch.__version__, *key)
        if expected is None:
            return ["", f"No CUDA expected-failures list for torch {torch.__version__}: nothing compared."]
        failed = {name for d, k, name, _ in failures if (d, k) == key}
        lines += [f"Unexpected failure: {key[0]} {key[1]} {name}" for name in sorted(failed - set(expected))]
        lines += [f"Unexpected pass (take it off the list): {key[0]} {key[1]} {name}"
                  for name in sorted(passed[key] & set(expected))]
    if len(lines) == 1:
        lines.append(f"Every failure is on the expected list for torch {torch.__version__}.")
    return lines


if __name__ == "__main__":
    main()
