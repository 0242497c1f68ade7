"""Autotuning's launch candidates (codegen/triton/tune.py): every candidate a kernel may be
launched with gives eager's results, and choices are kept on disk.  Without a GPU the kernels
run in Triton's interpreter, and a stand-in for the timing picks each candidate in turn."""
import pytest
import torch

import ember
from ember.codegen.triton import tune as triton_tune
from ember.codegen.triton.ops import TritonSource

pytest.importorskip("triton")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def pick(monkeypatch, tmp_path):
    """`pick["k"]`: the candidate the stand-in timing makes fastest; `pick["seen"]`: the tuned
    kernels' (tuning kind, candidates)."""
    state = {"k": 0, "seen": []}

    def measure(launchers, sources, step):
        state["seen"].append((sources[0].tuning, [triton_tune.current(source) for source in sources]))
        return [0.0 if position == state["k"] % len(launchers) else 1.0 for position in range(len(launchers))]

    monkeypatch.setattr(triton_tune, "measure", measure)
    monkeypatch.setattr(triton_tune, "ON_INTERPRETER", True)
    monkeypatch.setattr(triton_tune, "MIN_BYTES", 0)
    monkeypatch.setattr(triton_tune, "TUNE_SETTLED", True)
    monkeypatch.setattr(triton_tune, "_chosen", {})  # (on a GPU choices are kept: each test times afresh)
    with ember.config.patch(cpu_kernels="triton", cache_dir=str(tmp_path)):
        yield state


def _programs():
    def flat(x):
        return (x * 2).sin() + 1

    def rows_persistent(x, w, b):
        return torch.softmax(torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b), -1)

    def rows(x):  # rows of 3000: looped, and too short to split
        return x.sum(1), x.amax(1)

    def columns(x):  # sums down 3000 rows
        return x.sum(0)

    def split_rows(x):  # 8 rows of 5000: few programs, so each row's reduction splits in chunks
        return x.sum(1), torch.var_mean(x, 1)

    def split_columns(x):
        return x.sum(0) * 2

    return [(flat, [torch.randn(64, 300)]),
            (rows_persistent, [torch.randn(64, 300), torch.randn(300), torch.randn(300)]),
            (rows, [torch.randn(4, 3000)]),
            (columns, [torch.randn(3000, 8)]),
            (split_rows, [torch.randn(8, 5000)]),
            (split_columns, [torch.randn(5000, 16)])]


@pytest.mark.parametrize("k", [1, 2, -1])  # (the default, candidate 0, is what every other test runs)
def test_every_launch_candidate_gives_eager_results(pick, k):
    pick["k"] = k
    for fn, args in _programs():
        args = [a.to(DEVICE) for a in args]
        compiled = ember.compile(fn, backend="ember")
        torch.testing.assert_close(compiled(*args), fn(*args), rtol=1e-4, atol=1e-4)
    kinds = {kind for kind, _ in pick["seen"]}
    assert {"flat", "rows_persistent", "columns"} <= kinds, kinds
    assert any("RCHUNK" in dict(launches[0].constexprs) for _, launches in pick["seen"]), "no split reduction tuned"
    for kind, launches in pick["seen"]:
        assert len(launches) >= 3, (kind, launches)


def _source(tuning="flat", xnumel=1 << 20, rnumel=None, xblock=1024, rblock=None, warps=4, constexprs=None,
            grid_y=1):
    return TritonSource("kernel0", "@triton.jit\ndef kernel0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):\n"
                        "    pass\n", ["a"], ["b"], [], xnumel, rnumel, xblock, rblock, warps,
                        grid_y=grid_y, constexprs=constexprs or {}, pointer_dtypes=[torch.float32] * 2,
                        pointer_numels=[xnumel * (rnumel or 1)] * 2, tuning=tuning)


def test_candidates_keep_what_the_code_needs():
    persistent = triton_tune.candidates(_source("rows_persistent", 8192, 768, 1, 1024, 4))
    assert persistent[0] == triton_tune.Launch(1, 1024, 4) and len(persistent) >= 3
    assert {launch.RBLOCK for launch in persistent} == {1024}  # (the whole row in one block)
    split = triton_tune.candidates(_source("columns", 64, 50000, 32, 128, 4, {"RCHUNK": 12544}, grid_y=4))
    assert len(split) >= 3
    assert all(launch.constexprs == (("RCHUNK", 12544),) and 128 % launch.RBLOCK == 0 for launch in split)
    assert triton_tune.candidates(_source("rows", 8, 50000, 1, 2048, 8)) == [triton_tune.Launch(1, 2048, 8)]
    assert triton_tune.candidates(_source("fixed")) == [triton_tune.Launch(1024, None, 4)]
    dynamic = _source()
    dynamic.size_args = ["s0"]
    assert len(triton_tune.candidates(dynamic)) == 1


def test_choices_are_kept_on_disk_per_kernel_and_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(triton_tune, "_chosen", {})
    source = _source()
    launches = triton_tune.candidates(source)
    with ember.config.patch(cache_dir=str(tmp_path)):
        key = triton_tune.key(source, "GPU A")
        assert triton_tune.recorded(key, launches) is None
        triton_tune.record(source, key, launches[2], {})
        monkeypatch.setattr(triton_tune, "_chosen", {})  # (as another process: from the disk)
        assert triton_tune.recorded(key, launches) == launches[2]
        assert triton_tune.key(source, "GPU B") != key
        assert triton_tune.key(_source(xnumel=1 << 21), "GPU A") != key


@pytest.mark.skipif(not torch.cuda.is_available(), reason="times kernels on a GPU")
def test_kernels_are_timed_on_the_gpu_and_the_choice_kept(tmp_path, monkeypatch):
    import glob
    import json

    monkeypatch.setattr(triton_tune, "MIN_BYTES", 0)
    monkeypatch.setattr(triton_tune, "TUNE_SETTLED", True)  # (rows of 768 keep their default otherwise)
    monkeypatch.setattr(triton_tune, "_chosen", {})
    x, w, b = torch.randn(4096, 768, device="cuda"), torch.randn(768, device="cuda"), torch.randn(768, device="cuda")

    def fn(x, w, b):
        return torch.nn.functional.layer_norm(x, (768,), w, b).relu() * 2

    with ember.config.patch(cache_dir=str(tmp_path)):
        torch.testing.assert_close(ember.compile(fn, backend="ember")(x, w, b), fn(x, w, b))
    records = [json.load(open(path)) for path in glob.glob(str(tmp_path / "triton_tune" / "*.json"))]
    assert records and all(len(record["times_us"]) >= 3 and record["choice"] in record["times_us"]
                           for record in records), records
    assert all(time > 0 for record in records for time in record["times_us"].values())


def test_only_the_most_promising_kernels_of_a_graph_are_tuned():
    import types

    import torch

    from ember.codegen.triton import tune as triton_tune

    def kernel(tuning, numel):
        return types.SimpleNamespace(tuning=tuning, pointer_numels=[numel], pointer_dtypes=[torch.float32])

    kernels = [kernel("flat", 1 << 26)] * 10 + [kernel("columns", 1 << 22)] * 5 + \
        [kernel("rows_persistent", 1 << 22), kernel("rows_persistent", 1 << 23)]
    sources = {"step": types.SimpleNamespace(kernels=kernels)}
    wanted = {f"k{i}": [("step", i, [], None), 1] for i in range(len(kernels))}
    wanted["k0"][1] = 12  # (one kernel used by twelve layers: its bytes count twelve times)
    chosen = triton_tune.most_promising(wanted, sources)
    assert len(chosen) == triton_tune.MAX_TUNED
    assert chosen[:2] == ["k16", "k15"]  # persistent rows first, the larger first
    assert chosen[2:7] == ["k10", "k11", "k12", "k13", "k14"]  # then column sums
    assert chosen[7] == "k0"  # then pointwise, by bytes over all uses


def test_kinds_whose_default_wins_are_not_tuned():
    """Pointwise kernels and persistent reductions of rows of 1024 or more keep the generated
    default (measured to win); narrower persistent rows and column sums are still tuned."""
    big = _source("flat", 1 << 26, None, 2048, None, 8)
    assert triton_tune.settled(big) and not triton_tune.worth_tuning(big)
    assert triton_tune.settled(_source("rows_persistent", 8192, 768, 1, 1024, 4))
    assert not triton_tune.settled(_source("rows_persistent", 8192, 300, 8, 512, 8))
    assert not triton_tune.settled(_source("columns", 768, 8192, 32, 128, 4))
