"""Pointwise decompositions that correct fake-tensor metadata (the fuzzer found each)."""
import pytest
import torch

import ember


@pytest.mark.parametrize("backend", ["aot_eager", "ember"])
def test_bool_tensor_to_a_bool_power_stays_bool(backend):
    """Fake tensors say int64 for `bool ** True`; eager gives bool, and so must what follows."""
    def fn(b):
        return b ** True, torch.pow(b, False), (b ** True) & b, b ** 2

    b = torch.tensor([True, False, True])
    for ours, theirs in zip(ember.compile(fn, backend=backend)(b), fn(b)):
        assert ours.dtype == theirs.dtype
        assert torch.equal(ours, theirs)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "ember"])
def test_capture_sees_a_bool_power_as_bool(backend):
    """Capture's own fakes must say bool too: with int64 there, `v.long()` looked like `v` itself
    (`.long()` of an int64 tensor returns it) and the graph returned the int64 tensor for both
    (fuzz known 711707)."""
    def fn(c):
        v0 = c ** False
        v1 = v0 ** True
        return v1.contiguous(), v1.long(), (c ** True).long()

    c = torch.tensor([True, False, True])
    for ours, theirs in zip(ember.compile(fn, backend=backend)(c), fn(c)):
        assert ours.dtype == theirs.dtype
        assert torch.equal(ours, theirs)
