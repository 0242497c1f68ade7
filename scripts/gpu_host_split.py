"""Where a host-bound step's time goes, per variant: wall time per step, the host's time to issue a
step (no synchronization between calls), and for ember the guard's time alone and a cProfile of the
compiled call's Python by own time.  A debugging aid for resnet50 inference (GPU work ~3 ms, host
time about the same).

    python scripts/gpu_host_split.py --model resnet50 --mode infer [--variants eager,inductor,ember] --out DIR
"""
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))

from gpu_host_probe import parse_case  # noqa: E402


def _runners():
    import gc

    from ember.capture.runtime import CodeRunner

    return [o for o in gc.get_objects() if isinstance(o, CodeRunner) and o.entries]


def main() -> None:
    arguments, model, inputs, run = parse_case("infer", "eager,inductor,ember")
    import torch

    import ember

    lines = []
    for variant in arguments.variants.split(","):
        if variant == "eager":
            function = model
        elif variant == "inductor":
            function = torch.compile(model)
        else:
            ember.reset()
            function = ember.compile(model, backend="ember")
        for _ in range(5):
            run(function)
        torch.cuda.synchronize()
        walls, hosts = [], []
        for _ in range(5):
            torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(10):
                run(function)
            issued = time.perf_counter()
            torch.cuda.synchronize()
            ended = time.perf_counter()
            walls.append((ended - started) / 10 * 1e3)
            hosts.append((issued - started) / 10 * 1e3)
        lines.append(f"=== {variant}: wall {statistics.median(walls):.2f} ms/step ({min(walls):.2f}-{max(walls):.2f}), "
                     f"host issue {statistics.median(hosts):.2f} ms/step ({min(hosts):.2f}-{max(hosts):.2f})")
        if variant != "ember":
            continue
        torch.cuda.synchronize()
        with torch.no_grad() if arguments.mode == "infer" else torch.enable_grad(), \
                torch.autocast("cuda", dtype=torch.bfloat16):
            for runner in _runners():
                for guard, _ in runner.entries:
                    args = (model, inputs) if not isinstance(inputs, dict) else None
                    if args is None or len(runner.params) != 2:
                        continue
                    if not guard(None, *args):
                        continue
                    samples = []
                    for _ in range(5):
                        started = time.perf_counter()
                        for _ in range(100):
                            guard(None, *args)
                        samples.append((time.perf_counter() - started) / 100 * 1e6)
                    count = len(runner.cache_entries[0].guard_set.all_guards()) if runner.cache_entries else -1
                    lines.append(f"    guard of {runner.code.co_name}: {statistics.median(samples):.0f} us "
                                 f"({min(samples):.0f}-{max(samples):.0f}), {count} guards")
                    compiled = runner.entries[0][1]
                    for label, autocast in (("autocast on", True), ("autocast off", False)):
                        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                            samples = []
                            for _ in range(5):
                                torch.cuda.synchronize()
                                started = time.perf_counter()
                                for _ in range(10):
                                    compiled(None, *args)
                                samples.append((time.perf_counter() - started) / 10 * 1e3)
                            torch.cuda.synchronize()
                        lines.append(f"    the call past the guard, {label}: host {statistics.median(samples):.2f} ms "
                                     f"({min(samples):.2f}-{max(samples):.2f})")
        profiler = cProfile.Profile()
        torch.cuda.synchronize()
        profiler.enable()
        for _ in range(10):
            run(function)
        profiler.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
        lines.append(text.getvalue())
    output = "\n".join(lines)
    print(output)
    with open(os.path.join(arguments.out, f"gpu_host_split_{arguments.model}_{arguments.mode}.txt"), "w") as handle:
        handle.write(output + "\n")


if __name__ == "__main__":
    main()
