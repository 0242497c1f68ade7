"""GPU kernel partitioning as a scheduling pass (scheduling/gpu_partition.py): the Triton emitter
reports the read it could not serve from registers and never raises to re-partition; the pass
decides splits, stored values and split reductions, by the device's limits."""
import pytest
import torch

import ember
from ember.codegen.triton import backend as triton_backend
from ember.codegen.triton import split as triton_split
from ember.codegen.triton.kernel import TritonKernel
from ember.scheduling.gpu_partition import GpuLimits, partition, row_size_change, split_count

pytest.importorskip("triton")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # (on the CPU: Triton's interpreter)


def _scheduled_kernels(fn, *args):
    """The scheduled kernels of fn's graph with Triton kernels, with the arguments the backend
    gave the partitioning (dtypes and the rest)."""
    seen = []
    original = triton_backend.triton_kernels

    def spy(kernel, *rest, **kwargs):
        seen.append((kernel, rest, kwargs))
        return original(kernel, *rest, **kwargs)

    triton_backend.triton_kernels = spy
    args = [a.to(DEVICE) for a in args]
    try:
        with ember.config.patch(cpu_kernels="triton"):
            # (rows of thousands summed in another order, in chunks: float32 rounding of the order)
            torch.testing.assert_close(ember.compile(fn)(*args), fn(*args), rtol=1e-5, atol=1e-4)
    finally:
        triton_backend.triton_kernels = original
    return seen


def test_rows_of_two_sizes_start_a_new_kernel_and_the_emitter_does_not_raise():
    def fn(a, b):
        return a.sum(1) + b.sum(1)

    seen = _scheduled_kernels(fn, torch.randn(4, 10), torch.randn(4, 30))
    (kernel, (dtypes, *_), _), *_ = [s for s in seen if len(s[0].nodes) >= 2]
    position = row_size_change(kernel, list(kernel.nodes))
    assert position is not None and position > 0
    sources = triton_split.triton_kernels(kernel, dtypes)
    assert len(sources) >= 2 and all(source.unheld is None for source in sources)
    # the emitter, asked for the first part alone, generates it whole
    assert TritonKernel(list(kernel.nodes[:position]), kernel.outer, dtypes).generate("k").unheld is None


def test_a_value_read_where_the_kernel_holds_none_is_reported_and_the_pass_splits_there():
    # rows of 3000 are reduced in a loop: y is computed (and stored) in the sum's loop, and the
    # product after it reads y again, where no register holds it any more.  The emitter stands in
    # for the value, says which read it could not serve, and the pass splits before that node.
    def fn(x):
        y = x.sin()
        return y, y.sum(1, keepdim=True) * y

    seen = _scheduled_kernels(fn, torch.randn(4, 3000))
    (kernel, (dtypes, *_), _), = [s for s in seen if len(s[0].nodes) == 3]
    source = TritonKernel(list(kernel.nodes), kernel.outer, dtypes).generate(kernel.name)
    assert source.unheld == (2, kernel.nodes[0].name, False)
    parts = triton_split.triton_kernels(kernel, dtypes)
    assert len(parts) == 2 and all(part.unheld is None for part in parts)


class _Source:
    def __init__(self, rnumel, xnumel, xblock=1, tuning="rows", unheld=None):
        self.rnumel, self.xnumel, self.XBLOCK, self.tuning, self.unheld = rnumel, xnumel, xblock, tuning, unheld


class _Emitter:
    def __init__(self, nodes, persistent=False):
        self.nodes, self.persistent, self.index_checks = nodes, persistent, []


def test_split_reductions_follow_the_devices_limits():
    seen = _scheduled_kernels(lambda x: x.sum(1), torch.randn(4, 8192))
    kernel = seen[0][0]
    emitter, source = _Emitter(list(kernel.nodes)), _Source(8192, 4)
    always = lambda node, names: True  # noqa: E731
    assert split_count(emitter, source, GpuLimits(), always) == 8   # 264 programs wanted, rows of 8192 // 1024
    assert split_count(emitter, source, GpuLimits(programs=8), always) == 0  # 4 programs fill half of it
    assert split_count(emitter, source, GpuLimits(split_min_rnumel=1 << 20), always) == 0
    assert split_count(_Emitter(list(kernel.nodes), persistent=True), source, GpuLimits(), always) == 0


def test_a_kept_value_the_kernel_cannot_hold_is_stored_instead():
    seen = _scheduled_kernels(lambda x: (x.sin() * 2).cos(), torch.randn(8, 16))
    kernel, (dtypes, *_), _ = seen[0]
    name = kernel.nodes[0].name
    asked = []

    class Make:
        def __call__(self, nodes, kept=frozenset()):
            asked.append(set(kept))
            emitter = _Emitter(nodes)
            unheld = (1, name, True) if name in kept else None
            emitter.generate = lambda label: _Source(None, 128, unheld=unheld)
            return emitter

    sources = partition(kernel, Make(), None, lambda node, names: False, GpuLimits(),
                        internal=frozenset(node.name for node in kernel.nodes))
    if len(kernel.nodes) >= 2:  # (asked to keep it, reported it unheld: asked again without it)
        assert name in asked[0] and name not in asked[-1]
    assert len(sources) == 1 and sources[0].unheld is None


def test_split_reductions_of_one_kernel_each_get_a_workspace_of_their_own():
    # a pointwise head, a float amax, a pointwise tie mask and an int64 count: cut three times, two
    # split reductions.  Tails once took their names from the local head's length, so the count's
    # stage was named like the amax's and their workspaces shared a name; the amax's kernels were
    # then compiled for an int64 workspace and direct launches turned its NaN into -2**63 on a GPU.
    def fn(x):
        v = x - 1
        m = v.amax()
        ties = v == m
        return v, m, ties, ties.sum()

    x = torch.randn(16, 2, 16, 16)
    x[0, 0, 0, 0] = float("nan")
    args = [x.to(DEVICE)]
    with ember.config.patch(cpu_kernels="triton"):
        got = ember.compile(fn)(*args)
    torch.testing.assert_close(got, fn(*args), equal_nan=True)
    seen = _scheduled_kernels(fn, torch.randn(16, 2, 16, 16))
    splits = 0
    for kernel, (dtypes, *_), _ in seen:
        sources = triton_split.triton_kernels(kernel, dtypes)
        workspaces = [name for source in sources for name, _, _ in source.workspaces]
        assert len(set(workspaces)) == len(workspaces), workspaces
        splits += len(workspaces)
    assert splits >= 2
