"""Comparing one run of a program (ember's) with eager's, using a float64 run as the referee.

A float element is fine when it equals eager's (NaN equals NaN, inf equals inf) or lies within a
tolerance of eager's value or of the float64 reference's. The tolerance is that of the least
precise float dtype in the program (atol scaled by the typical magnitude, rtol) plus 8 times
eager's own error against the reference at that element (or its median relative error over the
tensor, where that is larger), so reassociation noise that eager
itself shows is never called wrong, while ember being far from both is. Where eager overflowed
(non-finite, while the float64 reference is finite) any ember value is accepted, and so is a
non-finite ember value anywhere else in that tensor.  Integer and bool elements must be equal to
eager's (or, where the values follow a float through a jump, to the reference's).

Values downstream of a jump (a comparison, floor, argmax, a float->int conversion) applied to a
noisy float ("fragile") may legitimately land on the other side: for them a few differing
elements are tolerated (2%, or 25% where float16/bfloat16 rounding is involved; at least one).
"""
from __future__ import annotations

import dataclasses

import torch

# dtype: (atol, rtol)
TOLERANCES = {
    torch.float64: (1e-10, 1e-7),
    torch.float32: (1e-5, 2e-5),
    torch.float16: (1e-3, 2e-3),
    torch.bfloat16: (8e-3, 1.6e-2),
}
EAGER_ERROR_FACTOR = 8.0
# Share of a fragile tensor's elements allowed to land on the other side of a jump: rounding in
# float16/bfloat16 moves values across jumps far more often than float32 does.
FRAGILE_FRACTION = {torch.float16: 0.25, torch.bfloat16: 0.25}
FRAGILE_FRACTION_DEFAULT = 0.02


@dataclasses.dataclass
class Mismatch:
    check: str       # values | nan_positions | shape | dtype | requires_grad | ...
    where: str       # "output 0 (v4)", "input a after the call", "grad of a"
    detail: str

    def describe(self) -> str:
        return f"{self.check}: {self.where}: {self.detail}"


def _format(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def tolerance_for(dtype: torch.dtype, noise_dtype: torch.dtype | None) -> tuple[float, float]:
    """(atol, rtol) of an output of `dtype` in a program whose least precise float is `noise_dtype`
    (rounding there reaches the output, whatever the output's own dtype)."""
    atol, rtol = TOLERANCES.get(dtype, TOLERANCES[torch.float32])
    if noise_dtype in TOLERANCES:
        noise_atol, noise_rtol = TOLERANCES[noise_dtype]
        atol, rtol = max(atol, noise_atol), max(rtol, noise_rtol)
    return atol, rtol


def _bad_elements(got: torch.Tensor, expected: torch.Tensor, reference: torch.Tensor | None,
                  noise_dtype: torch.dtype | None) -> torch.Tensor:
    """A bool tensor: where `got` is neither eager's value nor within tolerance of it or the reference."""
    if not got.dtype.is_floating_point and not expected.dtype.is_floating_point:
        bad = got != expected
        if reference is not None and reference.shape == got.shape and not reference.dtype.is_floating_point:
            bad &= got != reference
        return bad
    atol, rtol = tolerance_for(expected.dtype, noise_dtype)
    c = got.double()
    e = expected.double()
    have_reference = reference is not None and reference.shape == got.shape
    r = reference.double() if have_reference else e
    same = (torch.isnan(c) & torch.isnan(e)) | (c == e) | (torch.isnan(c) & torch.isnan(r)) | (c == r)
    if have_reference:
        # Eager overflowed (inf/NaN where float64 stays finite): there is no answer to hold ember to.
        overflowed = ~torch.isfinite(e) & torch.isfinite(r)
        same |= overflowed
        if bool(overflowed.any()):
            # ...and in this tensor ember overflowing at other elements is the same ill-conditioning
            # (which products reach inf first depends on the order of the operations: fuzz 9607)
            same |= ~torch.isfinite(c) & torch.isfinite(r)
    finite_e = e[torch.isfinite(e)].abs()
    scale = max(1.0, float(finite_e.median())) if finite_e.numel() else 1.0
    eager_error = torch.nan_to_num((e - r).abs(), nan=0.0, posinf=0.0, neginf=0.0)
    magnitude = torch.maximum(torch.nan_to_num(e.abs(), nan=0.0, posinf=0.0),
                              torch.nan_to_num(r.abs(), nan=0.0, posinf=0.0))
    # Eager's typical relative error over the tensor counts at every element: where eager's own
    # float32 is off by 1e-4 nearly everywhere (a gradient carrying a softmax backward's
    # cancellation through a sum), an element where its error happened to be small is no
    # stricter (conv 705081 on an H200: eager's weight gradient 0.6e-6 off at one element,
    # 2e-6 to 4e-6 at the others, every other kernel ~3e-6 there).
    typical = _typical_relative_error(eager_error, magnitude)
    tolerance = atol * scale + rtol * magnitude + EAGER_ERROR_FACTOR * torch.maximum(eager_error, typical * magnitude)
    close_e = (c - e).abs() <= tolerance
    close_r = (c - r).abs() <= tolerance
    return ~(same | close_e | close_r)


def _typical_relative_error(error: torch.Tensor, magnitude: torch.Tensor) -> float:
    """The median of eager's relative errors against the reference over the tensor's nonzero elements."""
    nonzero = magnitude > 0
    if not bool(nonzero.any()):
        return 0.0
    return float((error[nonzero] / magnitude[nonzero]).median())


def compare_tensor(got: torch.Tensor, expected: torch.Tensor, reference: torch.Tensor | None, *, where: str,
                   fragile: bool, noise_dtype: torch.dtype | None = None,
                   check_requires_grad: bool = True) -> Mismatch | None:
    if tuple(got.shape) != tuple(expected.shape):
        return Mismatch("shape", where, f"eager {tuple(expected.shape)}, ember {tuple(got.shape)}")
    if got.dtype != expected.dtype:
        return Mismatch("dtype", where, f"eager {expected.dtype}, ember {got.dtype}")
    if check_requires_grad and got.requires_grad != expected.requires_grad:
        return Mismatch("requires_grad", where,
                        f"eager requires_grad={expected.requires_grad}, ember {got.requires_grad}")
    if got.numel() == 0:
        return None
    got, expected = got.detach(), expected.detach()
    reference = reference.detach() if reference is not None else None
    bad = _bad_elements(got, expected, reference, noise_dtype)
    count = int(bad.sum())
    if count == 0:
        return None
    fraction = FRAGILE_FRACTION.get(noise_dtype, FRAGILE_FRACTION_DEFAULT)
    if fragile and count <= max(1, int(fraction * bad.numel())):
        return None
    position = tuple(int(i) for i in bad.nonzero()[0]) if bad.dim() else ()
    e_value = expected[position].item()
    c_value = got[position].item()
    r_text = ""
    if reference is not None and reference.shape == got.shape:
        r_text = f" (float64 reference {_format(reference[position].item())})"
    nan_differs = expected.dtype.is_floating_point and bool(
        (torch.isnan(got.double()) != torch.isnan(expected.double()))[bad].any())
    check = "nan_positions" if nan_differs else "values"
    detail = (f"{count} of {bad.numel()} elements differ; at {list(position)}: eager {_format(e_value)}, "
              f"ember {_format(c_value)}{r_text}")
    return Mismatch(check, where, detail)
