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
