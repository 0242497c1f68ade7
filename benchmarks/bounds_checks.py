"""What the bounds checks of generated kernels cost: BERT and GPT-2 steps with and without them.

ember's kernels check every data-dependent index (embedding, gather, x[idx], index_put,
scatter) and raise IndexError as eager does.  This times the same models compiled twice, with
`ember.config.bounds_checks` on and off, beside eager, in interleaved rounds (machine drift hits
all alike); it reports the median step time of each and the spread over rounds.

    python benchmarks/bounds_checks.py [--out DIR] [--rounds N]
"""
from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MODELS = ["bert", "gpt2"]
ROUNDS, PER_ROUND = 8, 10


def run_model(name: str, mode: str, rounds: int) -> dict:
    import torch

    import ember
    from codegen_speed import build, make_step

    torch.set_num_threads(os.cpu_count() or 1)
    steps = {}
    for variant in ("eager", "checks", "no_checks"):
        model, args, kwargs, loss_of = build(name)
        model.train(mode == "training")
        runner = model if variant == "eager" else ember.compile(model, backend="ember")
        step = make_step(runner, args, kwargs, loss_of, mode)
        with ember.config.patch(bounds_checks=variant != "no_checks"):
            for _ in range(3):  # compiles forward and backward under this setting, then warms up
                step()
        steps[variant] = step
    per_round: dict[str, list[float]] = {variant: [] for variant in steps}
    for _ in range(rounds):
        for variant, step in steps.items():
            times = []
            for _ in range(PER_ROUND):
                started = time.perf_counter()
                step()
                times.append(time.perf_counter() - started)
            per_round[variant].append(statistics.median(times))
    return per_round


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(run_model(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    import torch

    from machine import cpu_model, ember_revision
    from output import take_out_option

    out = take_out_option()
    rounds = ROUNDS
    if "--rounds" in sys.argv:
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1])
    rows = []
    for name in MODELS:
        for mode in ("inference", "training"):
            with tempfile.TemporaryDirectory() as cache:
                result = subprocess.run([sys.executable, __file__, "--child", name, mode, str(rounds)],
                                        capture_output=True, text=True, env=dict(os.environ, EMBER_CACHE_DIR=cache))
            if result.returncode != 0:
                print(result.stderr[-3000:])
                raise SystemExit(f"{name} {mode} failed")
            per_round = json.loads(result.stdout.strip().splitlines()[-1])
            rows.append((name, mode, per_round))
            print(name, mode, {k: round(statistics.median(v) * 1e3, 3) for k, v in per_round.items()}, flush=True)
    header = (f"Machine: {cpu_model()} ({os.cpu_count()} CPUs, 1-min load {os.getloadavg()[0]:.1f} at the end); "
              f"torch {torch.__version__}; ember git {ember_revision()}.")
    lines = [f"# Bounds checks in generated kernels: cost per step ({datetime.date.today()})", "", header, "",
             f"Median step time over {rounds} interleaved rounds of {PER_ROUND} steps each (ms); the cost is",
             "(checks - no checks) / no checks, as the median over rounds, with the lowest and highest round.",
             "", "| model | mode | eager | ember, checks | ember, no checks | cost of the checks | spread over rounds |",
             "|---|---|---:|---:|---:|---:|---|"]
    for name, mode, per_round in rows:
        costs = [(with_checks - without) / without
                 for with_checks, without in zip(per_round["checks"], per_round["no_checks"])]
        median = {variant: statistics.median(times) * 1e3 for variant, times in per_round.items()}
        lines.append(f"| {name} | {mode} | {median['eager']:.3f} | {median['checks']:.3f} | {median['no_checks']:.3f} "
                     f"| {100 * statistics.median(costs):+.2f}% | {100 * min(costs):+.2f}% to {100 * max(costs):+.2f}% |")
    path = os.path.join(out, "bounds_checks.md")
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
