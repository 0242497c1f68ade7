"""Memory bandwidth of memory-bound kernels on the GPU (issue 10, acceptance 4).

A pointwise chain, softmax and layer_norm on float32 tensors of 256 MB, each under eager, torch.compile
(Inductor) and ember, against a device-to-device copy of the same size measured in the same run.
Bytes counted: every input read once and every output written once (the floor any kernel must
move).  Times are medians of `triton.testing.do_bench` (CUDA events), over ROUNDS interleaved
rounds; the table gives the median round and the spread (min-max of the rounds).  Results are
checked against eager first.

    python benchmarks/gpu_bandwidth.py [--out DIR]
"""
from __future__ import annotations

import datetime
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import ember_revision  # noqa: E402
from output import take_out_option, write_table  # noqa: E402

ROUNDS = 5


def cases(torch):
    import torch.nn.functional as F

    rows, columns = 65536, 1024  # 256 MB of float32
    x = torch.randn(rows, columns, device="cuda")
    y = torch.randn(rows, columns, device="cuda")
    weight = torch.randn(columns, device="cuda")
    bias = torch.randn(columns, device="cuda")

    def chain(x, y):
        return (torch.sigmoid(x * 2 + y) * y - 1).relu()

    def softmax(x):
        return torch.softmax(x, -1)

    def layer_norm(x, weight, bias):
        return F.layer_norm(x, (columns,), weight, bias)

    size = x.numel() * x.element_size()
    return [("pointwise chain (2 in, 1 out)", chain, (x, y), 3 * size),
            ("softmax (1 in, 1 out)", softmax, (x,), 2 * size),
            ("layer_norm (1 in, 1 out)", layer_norm, (x, weight, bias), 2 * size)]


def main() -> None:
    folder = take_out_option()
    import torch
    import triton.testing

    import ember

    torch.manual_seed(0)
    device = torch.cuda.get_device_name()
    source = torch.randn(64 * 1024 * 1024, device="cuda")
    target = torch.empty_like(source)
    copy_bytes = 2 * source.numel() * source.element_size()
    workloads = cases(torch)
    compiled: dict = {}
    timings: dict = {}
    with torch.no_grad():
        for name, fn, args, _ in workloads:
            expected = fn(*args)
            for variant, make in (("inductor", torch.compile), ("ember", lambda f: ember.compile(f, backend="ember"))):
                function = make(fn)
                start = time.perf_counter()
                result = function(*args)
                torch.cuda.synchronize()
                cold = time.perf_counter() - start
                torch.testing.assert_close(result, expected, atol=1e-4, rtol=1e-4)
                compiled[(name, variant)] = (function, cold)
        for _ in range(ROUNDS):
            timings.setdefault("copy", []).append(triton.testing.do_bench(lambda: target.copy_(source),
                                                                          return_mode="median"))
            for name, fn, args, _ in workloads:
                for variant in ("eager", "inductor", "ember"):
                    function = fn if variant == "eager" else compiled[(name, variant)][0]
                    timings.setdefault((name, variant), []).append(
                        triton.testing.do_bench(lambda: function(*args), return_mode="median"))
    copy_ms = statistics.median(timings["copy"])
    copy_rate = copy_bytes / copy_ms / 1e6  # (bytes per ms / 1e6: GB/s)
    lines = [f"# GPU bandwidth ({datetime.date.today()}, {device}, torch {torch.__version__}, "
             f"ember {ember_revision()})", "",
             f"Device-to-device copy of 256 MB: {copy_ms:.3f} ms, **{copy_rate:.0f} GB/s** (read + write), "
             f"spread {min(timings['copy']):.3f}-{max(timings['copy']):.3f} ms.", "",
             "| case | variant | ms (median of rounds) | spread ms | GB/s | of copy | cold s |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for name, _, _, nbytes in workloads:
        for variant in ("eager", "inductor", "ember"):
            samples = timings[(name, variant)]
            ms = statistics.median(samples)
            rate = nbytes / ms / 1e6
            cold = "" if variant == "eager" else f"{compiled[(name, variant)][1]:.1f}"
            lines.append(f"| {name} | {variant} | {ms:.3f} | {min(samples):.3f}-{max(samples):.3f} | {rate:.0f} | "
                         f"{rate / copy_rate:.0%} | {cold} |")
    write_table(folder, "gpu_bandwidth.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
