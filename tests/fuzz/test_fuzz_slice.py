"""A fixed slice of the differential fuzzer: seeded random programs through ember, compared with eager.

Fails on any wrong result or crash that is not in expected_failures.py, and on any listed failure
that no longer happens (so the list shrinks as bugs get fixed). Prints the counts per class.

    python3 -m pytest tests/fuzz/test_fuzz_slice.py -p no:cacheprovider -q -s
    python3 -m tests.fuzz.run --backend ember --seeds 0:40 --minimize     # the same programs, minimized
"""
from __future__ import annotations

import collections

import pytest

from .expected_failures import EXPECTED, FLAKY
from .generator import generate
from .harness import run_program

# (mode, seeds) per backend: kept under a minute on 2 cores once ember's kernel cache is warm.
_MODES = ("reductions", "intmath", "special", "lowp", "autograd", "inplace", "index", "layout", "conv")
SLICES = {
    "aot_eager": [("default", range(0, 40))] + [(mode, range(0, 4)) for mode in _MODES],
    "ember": [("default", range(0, 40))] + [(mode, range(0, 6)) for mode in _MODES],
    # every size symbolic (dynamic=True): the symbolic AOT trace, kernels and wrapper
    "ember_dynamic": [("default", range(40, 70))] + [(mode, range(6, 9)) for mode in _MODES],
    # backwards under compiled autograd (compiled by ember), at three sizes: the captured graph,
    # then its graph over symbolic sizes made and run at two others
    "ember_ca": [("default", range(70, 80)), ("autograd", range(0, 12)), ("inplace", range(0, 4))],
}
# Triton kernels under Triton's interpreter (the GPU code generator, on CPU tensors)
if __import__("os").environ.get("TRITON_INTERPRET") == "1":
    SLICES["ember_triton"] = [("default", range(0, 30))] + [(mode, range(0, 3)) for mode in _MODES]


@pytest.mark.parametrize("backend", sorted(SLICES))
def test_fuzz_slice(backend):
    outcomes = []
    for mode, seeds in SLICES[backend]:
        for seed in seeds:
            outcomes.extend(run_program(generate(seed, mode), (backend,)))
    counts = collections.Counter(outcome.cls for outcome in outcomes)
    print(f"\n{backend}: {len(outcomes)} programs: " + ", ".join(f"{cls} {n}" for cls, n in sorted(counts.items())))
    unexpected, fixed = [], []
    for outcome in outcomes:
        key = (backend, outcome.mode, outcome.seed)
        failed = outcome.cls in ("wrong", "crash", "flaky_eager")
        if failed and key not in EXPECTED:
            unexpected.append(f"{outcome.mode} seed {outcome.seed}: {outcome.cls} {outcome.check or ''} "
                              f"{outcome.exception or outcome.detail}")
        if not failed and key in EXPECTED and key not in FLAKY:
            fixed.append(f"{outcome.mode} seed {outcome.seed}: listed as {EXPECTED[key]!r}, now {outcome.cls}")
    message = []
    if unexpected:
        message.append("new failures (repro: python3 -m tests.fuzz.minimize --seed S --mode M --backend B):\n  "
                       + "\n  ".join(unexpected))
    if fixed:
        message.append("fixed, remove from tests/fuzz/expected_failures.py:\n  " + "\n  ".join(fixed))
    assert not message, "\n".join(message)


# Programs the fuzzer found wrong or crashing under dynamic=True, each fixed (regression tests):
# inplace 4843 (a view's sizes reached the graph as raw SymInts: NameError), index 4817 (the
# same), inplace 4897 (a size the guards make 1 was not broadcast: a read past a tensor),
# default 54400 (a guard named a stride's symbol after using it), default 60988 (conditioning).
DYNAMIC_REGRESSIONS = [("inplace", 4843), ("index", 4817), ("inplace", 4897), ("default", 54400),
                       ("default", 60988), ("default", 54179), ("default", 54625),
                       # eager's errors: gelu of int16 (4809: eager_accepts at symbolic sizes tried only
                       # tiny shapes and remembered "accepted"), writes into memory read (4828, 4966)
                       ("intmath", 4809), ("autograd", 4828), ("index", 4966),
                       # found by the call at other sizes (resize.py): a data-dependent size the trace
                       # fixed to a number (73631), an index_put value broadcast the guards did not
                       # check (73850, inplace 7052), an in-place op's functional form changing its
                       # target's strides (autograd 7033), softmax of an empty bool tensor (reductions 7054)
                       ("default", 73631), ("default", 73850), ("inplace", 7052), ("autograd", 7033),
                       ("reductions", 7054),
                       # a decomposition at a data-dependent size dropped layer_norm's shape check (73878);
                       # a product whose zero meets an overflow (74038, conditioning)
                       ("default", 73878), ("default", 74038), ("inplace", 7009),
                       # var_mean's mean sums in double as ATen's CPU Welford (known 7706); argmax of
                       # the means of normalized rows is ill-conditioned (reductions 8088)
                       ("known", 7706), ("reductions", 8088)]


@pytest.mark.parametrize("mode,seed", DYNAMIC_REGRESSIONS, ids=[f"{m}-{s}" for m, s in DYNAMIC_REGRESSIONS])
def test_dynamic_regressions(mode, seed):
    (outcome,) = run_program(generate(seed, mode), ("ember_dynamic",))
    assert outcome.cls not in ("wrong", "crash"), f"{outcome.cls} {outcome.check}: {outcome.exception or outcome.detail}"


def test_dynamic_compiles_do_not_depend_on_earlier_ones():
    """ember_dynamic default 62275 was right alone and wrong after 62273 in the same process: the
    size symbols' lower bounds were kept by name across compiles (every trace has an s28), so
    62273's weaker bounds left 62275's slice undecided, and the ATen slice that ran instead read
    a buffer laid out other than planned."""
    outcomes = [run_program(generate(seed, "default"), ("ember_dynamic",))[0] for seed in (62273, 62275)]
    for outcome in outcomes:
        assert outcome.cls not in ("wrong", "crash"), \
            f"seed {outcome.seed}: {outcome.cls} {outcome.check}: {outcome.exception or outcome.detail}"


# Programs the fuzzer found wrong or crashing with Triton kernels (on the GPU, or under Triton's
# interpreter), each fixed; they run here under the interpreter (backend ember_triton):
# a one-element load masked in dimensions its pointer lacks (183), logical_xor (183), kernels
# split twice (3595), an index expression through a data-dependent index (2454), integer
# literals out of their dtype's range (1336, 2073), eager's Welford mean of an infinity (3176),
# booleans through maximum and 0-d loads (reductions 164).
TRITON_REGRESSIONS = [("default", 183), ("default", 3595), ("default", 2454), ("default", 1336),
                      ("default", 2073), ("default", 3176), ("reductions", 164), ("reductions", 311),
                      # an infinite constant cast to an integer dtype (intmath 613: C leaves it undefined)
                      ("intmath", 613),
                      # the interpreter's float32 -> bfloat16 truncation, amplified (a GPU rounds to
                      # nearest: tests/triton_rounding.py makes the interpreter round so too)
                      ("lowp", 9429), ("lowp", 9513),
                      # the interpreter's bfloat16 -> float32 cast made subnormals zero (any() of one:
                      # False; relu's gradient at one: 0)
                      ("default", 22580), ("lowp", 20011),
                      # the Welford mean of a row whose last element is -inf: -inf, not NaN
                      ("conv", 10231),
                      # the interpreter's integer -> bfloat16 cast kept the integers' bits (arange in
                      # bfloat16: zeros; 10773); floor_divide's result laid out as its fake, not as eager
                      # (untagged pointwise: the graph ran as ATen calls and a traced view raised; 10705)
                      ("layout", 10773), ("layout", 10705)]


@pytest.mark.parametrize("mode,seed", TRITON_REGRESSIONS, ids=[f"{m}-{s}" for m, s in TRITON_REGRESSIONS])
def test_triton_regressions(mode, seed):
    pytest.importorskip("triton")
    import os

    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the CPU graphs' Triton kernels run under Triton's interpreter only")
    (outcome,) = run_program(generate(seed, mode), ("ember_triton",))
    assert outcome.cls in ("ok", "eager_error", "eager_wrong", "ill_conditioned"), (
        outcome.cls, outcome.check, outcome.detail, outcome.exception)


# Programs the fuzzer found crashing, each fixed, per backend: a backward pruned to the given
# tangents kept a strided value made from a missing tangent alive (zeros_like of it), which
# compiled autograd passes as None (default 9638); an ATen view planned with elements sharing
# memory (layout 9537).
REGRESSIONS = [("ember_ca", "default", 9638), ("ember", "default", 9638), ("ember", "layout", 9537),
               # the comparison's and the conditioning's: compiled autograd's 0 * inf at more elements of
               # a gradient where eager overflowed too (9607); a convolution's bias gradient before a
               # training batch_norm, exactly 0, rounding noise in every kernel (9853)
               ("ember_ca", "autograd", 9607), ("ember", "conv", 9853),
               # two reshapes of one transposed tensor, each a copy in eager, merged by CSE into one
               # buffer: two outputs sharing memory (_unsafe_view was not seen as a view; 20980)
               ("ember", "default", 20980),
               # batch_norm over a channel of -1.7e38: x * invstd overflows in one order of the
               # operations and not in another (10072; the conditioning's)
               ("ember", "conv", 10072),
               # eager's CPU batch_norm backward (eval) misreads an input channels-last only by its
               # size-1 dims; ember's gradient was the formula's (10155; the conditioning's)
               ("ember", "conv", 10155),
               # the harness's: inputs grown for the resized call were views where the originals were
               # not (eager's autograd refused an in-place write through one: 10377)
               ("ember_ca", "inplace", 10377),
               # a training batch_norm of a constant channel: 0 +- noise times 1/sqrt(eps) (10541)
               ("ember", "conv", 10541),
               # batch_norm of a permuted input: eager's CPU kernel returns it contiguous, its meta
               # function permuted; `.view(-1)` of the result raised (10874)
               ("ember", "conv", 10874),
               # the mean of a layer_norm output (0 +- noise) raised to non-integer powers: NaN or a
               # number by the noise's sign (11128; the conditioning's)
               ("ember", "lowp", 11128),
               # eager's CPU batch_norm backward (training) misreads an input [5, 100, 5, 1] with
               # strides (500, 1, 100, 1): one bias gradient for every channel (11091; the conditioning's)
               ("ember", "conv", 11091),
               # fmod by a layer_norm output of 0.0156: its rounding noise times a quotient of 64
               # (11412, the resized call; the conditioning's)
               ("ember_ca", "default", 11412),
               # a view of a graph intermediate returned by an inference graph (run under no_grad)
               # to a caller in grad mode: a view made in no_grad mode, which autograd refused to
               # write in place with a leaf's values (scatter_add_; 11668)
               ("ember", "inplace", 11668),
               # eager's in-place check called a view a leaf (its grad_fn, due since its base began to
               # need grad, not yet made: `v1[0:] = b`); read first, eager agrees with ember (13752,
               # the harness's)
               ("ember", "inplace", 13752)]


@pytest.mark.parametrize("backend,mode,seed", REGRESSIONS, ids=[f"{b}-{m}-{s}" for b, m, s in REGRESSIONS])
def test_regressions(backend, mode, seed):
    (outcome,) = run_program(generate(seed, mode), (backend,))
    assert outcome.cls in ("ok", "eager_error", "eager_wrong", "ill_conditioned"), (
        outcome.cls, outcome.check, outcome.detail, outcome.exception)
