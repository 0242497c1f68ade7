"""Cold compiles in worker processes (ember/codegen/triton/pool.py): a worker compiles a kernel
from the specialization the parent's warm-up would compile, into Triton's cache, with no GPU."""
import json
import os

import pytest
import torch

pytest.importorskip("triton")

import ember  # noqa: E402
from ember.codegen.triton import pool as triton_pool  # noqa: E402

KERNEL = '''import triton
import triton.language as tl


@triton.jit
def add_one(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tl.store(out_ptr0 + xindex, tl.load(in_ptr0 + xindex, xmask) + {constant}, xmask)
'''


def _specialization(block: int) -> str:
    return json.dumps({"name": "add_one", "signature": {"in_ptr0": "*fp32", "out_ptr0": "*bf16", "xnumel": "i32",
                                                        "XBLOCK": "constexpr"},
                       "constant_keys": [[3]], "constant_vals": [block],
                       "attrs_keys": [[0], [1], [2]], "attrs_vals": [[["tt.divisibility", 16]]] * 3,
                       "options": {"num_warps": 4, "debug": False}, "key": "unused"})


def test_a_worker_compiles_a_kernel_for_a_gpu_it_does_not_have(tmp_path, monkeypatch):
    """The worker imports neither torch nor ember and touches no CUDA: the kernel's cubin lands in
    the cache the worker was given; a kernel Triton rejects comes back as an error message."""
    (tmp_path / "k.py").write_text(KERNEL.format(constant="1.0"))
    (tmp_path / "bad.py").write_text(KERNEL.format(constant="undefined_name"))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # (the workers' Triton compiles)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    triton_pool.shutdown()  # (workers started now see this environment)
    try:
        target = ["cuda", 90, 32]
        answers = triton_pool.run_jobs([[str(tmp_path / "k.py"), "add_one", _specialization(1024), target],
                                        [str(tmp_path / "bad.py"), "add_one", _specialization(1024), target],
                                        [str(tmp_path / "k.py"), "add_one", _specialization(512), target]], count=2)
    finally:
        triton_pool.shutdown()
    assert answers[0] == "ok" and answers[2] == "ok", answers
    assert "undefined_name" in answers[1], answers
    cubins = [name for _, _, names in os.walk(tmp_path / "cache") for name in names if name.endswith(".cubin")]
    assert len(cubins) == 2


def test_the_worker_script_imports_no_torch():
    import subprocess
    import sys

    code = (f"import runpy, sys; runpy.run_path({triton_pool.WORKER_SCRIPT!r}, run_name='not_main'); "
            "import triton.compiler; print('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_workers_are_off_under_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not triton_pool.workers_enabled()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the hand-over needs the parent's GPU target")
def test_the_parent_finds_every_kernel_the_workers_compiled(monkeypatch):
    """A graph of many distinct kernels (a fresh constant: none is cached yet) compiles in the
    workers; the parent's own compiles are then all cache hits, and the results are eager's."""
    import random

    import ember

    monkeypatch.setattr(ember.config._config, "compile_workers", 2)
    monkeypatch.setattr(triton_pool, "MIN_KERNELS", 2)
    c = random.random() + 1.0

    def fn(x):
        return ((x * c).sin().sum(0), (x * c).cos().sum(1), (x + c).exp().amax(0), (x - c).tanh().amin(1),
                (x * c).softmax(0), (x * c).log_softmax(1), (x * c).var(0), (x + c).abs().sum(),
                (x / c).sigmoid().mean(1))

    x = torch.randn(64, 300, device="cuda")
    compiled = ember.compile(fn, backend="ember")
    for ours, theirs in zip(compiled(x), fn(x)):
        torch.testing.assert_close(ours, theirs)
    counts = triton_pool.last_counts
    assert counts["kernels"] >= triton_pool.MIN_KERNELS
    assert counts["misses"] == 0 and counts["hits"] > 0, counts
