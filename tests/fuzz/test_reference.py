"""The fuzzer's float64 reference run (harness.RoundedCasts): explicit conversions round as
eager's do, the arithmetic after them stays in float64."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .generator import generate
from .harness import RoundedCasts, run_program


def test_arithmetic_after_a_conversion_stays_float64():
    x = torch.full((3, 5), 127.0, dtype=torch.float64)
    eager = F.layer_norm(x.half(), (3, 5), eps=1e-3)
    assert eager.abs().max() > 0  # float16 layer_norm of a constant: eager's float32 rounding residue
    with RoundedCasts():
        reference = F.layer_norm(x.half(), (3, 5), eps=1e-3)
    assert reference.dtype == torch.float64
    assert reference.abs().max() == 0


def test_conversions_still_round_and_overflow():
    x = torch.tensor([0.1, 70000.0, 1.0 / 3.0], dtype=torch.float64)
    with RoundedCasts():
        half = x.half()
        single = x.to(torch.float32)
        total = x.sum(dtype=torch.float16)
        ones = torch.ones_like(x, dtype=torch.bfloat16)
    torch.testing.assert_close(half, x.half().double(), equal_nan=True)
    assert half.dtype == torch.float64 and torch.isinf(half[1])
    torch.testing.assert_close(single, x.float().double())
    assert total.dtype == torch.float64 and torch.isinf(total)
    assert ones.dtype == torch.float64


def test_mixed_dtypes_after_a_conversion_keep_a_reference():
    """`.float()` of a float64 reference value meeting another float64 input in index_put: with
    the float32 result the reference raised (dtypes differ) and there was no referee."""
    a = torch.tensor([1.0, 2.0], dtype=torch.float64)
    b = torch.tensor([[0.5]], dtype=torch.float64)
    with RoundedCasts():
        out = a[None].float().index_put((torch.tensor([0, 0]),), b, accumulate=True)
    torch.testing.assert_close(out, torch.tensor([[2.0, 3.0]], dtype=torch.float64))


def test_noise_cases_are_not_called_wrong():
    """Seeds whose 'failures' were eager's own rounding or overflow: 2366 (float16 layer_norm of
    a constant row: eager 2.6e-3 after the weight, exactly 0 in float64), 3323 (the same residue,
    negative, under log: eager NaN, exact -inf), 4540 (float32 variance overflow: eager NaN,
    float64 finite; the reference was lost to a float32/float64 index_put)."""
    for seed in (2366, 3323, 4540):
        for outcome in run_program(generate(seed, "default"), ("aot_eager",)):
            assert outcome.cls == "ok", (seed, outcome.check, outcome.detail)


def test_constants_the_program_makes_are_float64_holding_their_dtypes_value():
    x = torch.zeros(4, dtype=torch.float64)
    with RoundedCasts():
        constant = torch.tensor(0.1, dtype=torch.float32)
        filled = x.index_put((torch.tensor([1, 3]),), constant, accumulate=True)   # autograd 1645
    assert constant.dtype == torch.float64 and constant.item() == torch.tensor(0.1, dtype=torch.float32).item()
    assert filled[1].item() == constant.item()


def test_overflow_eager_shows_in_a_tensor_excuses_ember_overflowing_elsewhere_in_it():
    """Fuzz 9607: eager's gradient had NaNs (0 * inf) where float64 stays finite; compiled
    autograd's had them at 12 more elements (another order of the same overflowing products).
    A finite wrong value there, or NaNs in a tensor where eager did not overflow, still count."""
    from .compare import compare_tensor

    reference = torch.zeros(4, dtype=torch.float64)
    eager = torch.tensor([float("nan"), 0.0, 0.0, 0.0])
    assert compare_tensor(torch.tensor([float("nan"), float("nan"), 0.0, 0.0]), eager, reference,
                          where="grad", fragile=False) is None
    assert compare_tensor(torch.tensor([float("nan"), 0.0, 5.0, 0.0]), eager, reference,
                          where="grad", fragile=False) is not None
    assert compare_tensor(torch.tensor([0.0, float("nan"), 0.0, 0.0]), torch.zeros(4), reference,
                          where="grad", fragile=False) is not None


def test_eagers_typical_error_over_a_tensor_counts_at_every_element():
    """Conv 705081 (H200): a weight gradient eager computes 1e-4 off the float64 reference at most
    elements, but only 1e-5 off at one: ember's 1e-4 there is the same noise.  Where eager is
    accurate throughout, 1e-4 still counts."""
    from .compare import compare_tensor

    reference = torch.linspace(1.0, 2.0, 9, dtype=torch.float64)
    eager = (reference * (1 + 1e-4 * torch.tensor([1, -1, 1, -1, 1e-2, 1, -1, 1, -1]))).float()
    got = eager.clone()
    got[4] = reference[4] * (1 + 3e-4)
    assert compare_tensor(got, eager, reference, where="grad", fragile=False) is None
    accurate = reference.float()
    assert compare_tensor(got, accurate, reference, where="grad", fragile=False) is not None


def test_floats_made_from_integers_are_float64_holding_their_dtypes_value():
    """`torch.div(bool_tensor, 1e-3, rounding_mode='trunc')` and `torch.arange(0, 0.5, 0.5)` are
    float32 (the default dtype) in eager; in the reference they met float64 weights in a
    layer_norm, which raised, and the run had no referee (lowp 16953: a float16 weight gradient
    that 1-ulp differences of its log_softmax input move by 1%, eager's own error, called wrong)."""
    b = torch.tensor([True, False])
    with RoundedCasts():
        quotient = torch.div(b, 1e-3, rounding_mode="trunc")
        steps = torch.arange(0, 1.0, 0.3)
        normed = F.layer_norm(quotient, (2,), torch.ones(2, dtype=torch.float64))
    assert quotient.dtype == steps.dtype == normed.dtype == torch.float64
    assert quotient.tolist() == torch.div(b, 1e-3, rounding_mode="trunc").tolist()
    assert steps.tolist() == torch.arange(0, 1.0, 0.3).double().tolist()
    (outcome,) = run_program(generate(16953, "lowp"), ("aot_eager",))
    assert outcome.cls == "ok", (outcome.check, outcome.detail)
