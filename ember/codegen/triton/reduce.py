"""Reductions in Triton kernels: one block reduced at once (persistent rows) or accumulated over
an r loop (init, update, finish), Welford included.  TritonKernel (kernel.py) makes one per
reduction node."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..kernel import Scope
from .ops import _exact_quotient

if TYPE_CHECKING:
    from .kernel import TritonKernel


# One block reduced along r, for the reductions that combine elementwise
_BLOCK_REDUCE = {"sum": "tl.sum({0}, 1)[:, None]", "max": "tl.reduce({0}, 1, _ember_max)[:, None]",
                 "min": "tl.reduce({0}, 1, _ember_min)[:, None]", "prod": "tl.reduce({0}, 1, _ember_mul)[:, None]",
                 "any": "(tl.max({0}, 1)[:, None] != 0)", "all": "(tl.min({0}, 1)[:, None] != 0)"}


class _Reducer:
    """One reduction's code: whole (persistent: the row is one block) or init/update/finish
    (looped: [XBLOCK, RBLOCK] accumulators, reduced after the loop)."""

    def __init__(self, kernel: TritonKernel, kind: str, acc: str, acc_torch: torch.dtype) -> None:
        self.kernel, self.kind, self.acc, self.acc_torch = kernel, kind, acc, acc_torch
        floating = acc_torch.is_floating_point
        info = None if floating or acc_torch == torch.bool else torch.iinfo(acc_torch)
        lowest = '-float("inf")' if floating else str(info.min) if info else "0"
        highest = 'float("inf")' if floating else str(info.max) if info else "1"
        self.identity = {"sum": "0", "prod": "1", "max": lowest, "argmax": lowest, "min": highest,
                         "argmin": highest, "any": "0", "all": "1", "welford_mean": "0", "welford_m2": "0"}[kind]

    def _across(self, block: str) -> str:
        """A [XBLOCK, RBLOCK] block (masked lanes at the identity) reduced along r: [XBLOCK, 1]."""
        reduced = self.kernel.emit(_BLOCK_REDUCE[self.kind].format(block))
        if self.kind == "sum" and self.acc_torch.is_floating_point:
            # eager's sum of -0.0s is +0.0, tl.sum's -0.0 (its sign shows through atan2 and division:
            # test_a_sum_of_negative_zeros_is_positive_zero_as_in_eager)
            reduced = self.kernel.emit(f"({reduced} + 0.0)")
        return reduced

    def _input(self, value: str) -> str:
        kernel = self.kernel
        if self.kind in ("any", "all"):
            return kernel.emit(f"({value} != 0).to(tl.int8)")
        return kernel.emit(f"{value}.to({self.acc})")

    def whole(self, value: str) -> dict[str, str]:
        kernel, kind = self.kernel, self.kind
        value = self._input(value)
        masked = kernel.emit(f"tl.where(xmask & rmask, {value}, {self.identity})")
        if kind in _BLOCK_REDUCE:
            return {kind: self._across(masked)}
        if kind in ("argmax", "argmin"):
            positions = kernel.emit(f"tl.broadcast_to(rindex, {masked}.shape)")
            pair = kernel.emit(f"tl.reduce(({masked}, {positions}), 1, _ember_{kind})")
            return {kind: kernel.emit(f"{pair}[1][:, None]")}
        # welford: passes over registers; the mean is NaN once an infinity meets another value, as
        # eager's, and the sum's mean is refined by the mean of the deviations from it, so that the
        # mean of equal values is the value (test_variance_of_equal_values_is_exactly_zero).
        total = kernel.emit(f"tl.sum({masked}, 1)[:, None]")
        infinite = kernel.emit(f"tl.max(tl.where(xmask & rmask, (tl.abs({value}) == float('inf')).to(tl.int8), 0), 1)"
                               f"[:, None]")
        first = kernel.emit(f"tl.where(({infinite} != 0) & (rnumel > 1), float('nan'), "
                            f"{_exact_quotient(total, 'rnumel', self.acc_torch)})")
        shift = kernel.emit(f"tl.sum(tl.where(xmask & rmask, {value} - {first}, 0), 1)[:, None]")
        refined = kernel.emit(f"({first} + {_exact_quotient(shift, 'rnumel', self.acc_torch)})")
        # (an overflowing sum's inf mean stays: inf - inf would make it NaN)
        mean = kernel.emit(f"tl.where({refined} == {refined}, {refined}, {first})")
        centered = kernel.emit(f"tl.where(xmask & rmask, {value} - {mean}, 0)")
        m2 = kernel.emit(f"tl.sum({centered} * {centered}, 1)[:, None]")
        return {"welford_mean": mean, "welford_m2": m2}

    def init(self, scope: Scope) -> None:
        kernel = self.kernel
        self.name = kernel.new_temp("acc")
        full = f"tl.full([XBLOCK, RBLOCK], {self.identity}, {self.acc if self.kind not in ('any', 'all') else 'tl.int8'})"
        if self.kind.startswith("welford"):
            scope.lines += [f"{self.name}_mean = {full}", f"{self.name}_m2 = {full}", f"{self.name}_n = {full}"]
        else:
            scope.lines.append(f"{self.name} = {full}")
            if self.kind in ("argmax", "argmin"):
                scope.lines.append(f"{self.name}_index = tl.zeros([XBLOCK, RBLOCK], tl.int64)")

    def update(self, value: str) -> None:
        kernel, kind, acc = self.kernel, self.kind, self.name
        value = self._input(value)
        lines = kernel.scope.lines
        mask = "xmask & rmask"
        if kind == "sum":
            lines.append(f"{acc} = {acc} + tl.where({mask}, {value}, 0)")
        elif kind in ("max", "min", "prod", "any", "all"):
            combine = {"max": "_ember_max", "min": "_ember_min", "prod": "_ember_mul", "any": "tl.maximum",
                       "all": "tl.minimum"}[kind]
            lines.append(f"{acc} = tl.where({mask}, {combine}({acc}, {value}), {acc})")
        elif kind in ("argmax", "argmin"):
            lines.append(f"{acc}_next, {acc}_index_next = _ember_{kind}({acc}, {acc}_index, {value}, "
                         f"tl.broadcast_to(rindex, {acc}.shape).to(tl.int64))")
            lines.append(f"{acc} = tl.where({mask}, {acc}_next, {acc})")
            lines.append(f"{acc}_index = tl.where({mask}, {acc}_index_next, {acc}_index)")
        else:  # Welford, one lane per element of the block
            lines += [f"{acc}_n_next = {acc}_n + 1", f"{acc}_delta = {value} - {acc}_mean",
                      f"{acc}_mean_next = {acc}_mean + {acc}_delta / {acc}_n_next",
                      f"{acc}_m2 = tl.where({mask}, {acc}_m2 + {acc}_delta * ({value} - {acc}_mean_next), {acc}_m2)",
                      f"{acc}_mean = tl.where({mask}, {acc}_mean_next, {acc}_mean)",
                      f"{acc}_n = tl.where({mask}, {acc}_n_next, {acc}_n)"]

    def finish(self) -> dict[str, str]:
        kernel, kind, acc = self.kernel, self.kind, self.name
        if kind in _BLOCK_REDUCE:
            return {kind: self._across(acc)}
        if kind in ("argmax", "argmin"):
            pair = kernel.emit(f"tl.reduce(({acc}, {acc}_index), 1, _ember_{kind})")
            return {kind: kernel.emit(f"{pair}[1][:, None]")}
        triple = kernel.emit(f"tl.reduce(({acc}_mean, {acc}_m2, {acc}_n), 1, _ember_welford_combine)")
        return {"welford_mean": kernel.emit(f"{triple}[0][:, None]"), "welford_m2": kernel.emit(f"{triple}[1][:, None]")}
