"""torch's queries of process state (is distributed available, is an ONNX export running, ...)
are answered at capture time; an answer the program can change is guarded.  TorchScript's
identity-like helpers (torch.jit.annotate, torch.jit._unwrap_optional) are inlined."""
from typing import Any

import pytest
import torch

import ember

from capture_helpers import assert_matches_eager


def test_distributed_is_available_is_answered_in_the_graph():
    def f(x):
        return x + 1 if torch.distributed.is_available() else x - 1

    assert_matches_eager(f, torch.randn(3), graphs=1)


@pytest.mark.skipif(not torch.distributed.is_available(), reason="no torch.distributed")
def test_distributed_is_initialized_is_answered_in_the_graph():
    def f(x):
        return x + 1 if torch.distributed.is_initialized() else x - 1

    assert_matches_eager(f, torch.randn(3), graphs=1)


def test_checkpoint_validity_is_answered_in_the_graph():
    def f(x):
        return x + 1 if torch.autograd._is_checkpoint_valid() else x - 1

    assert_matches_eager(f, torch.randn(3), graphs=1)


def test_onnx_export_query_is_guarded_and_recaptured_when_it_changes():
    import torch.onnx
    from torch.onnx._internal.exporter import _flags

    def f(x):
        return x - 1 if torch.onnx.is_in_onnx_export() else x + 1

    assert_matches_eager(f, torch.randn(3), graphs=1)
    ember.reset()
    compiled = ember.compile(f, backend="eager")
    x = torch.zeros(2)
    assert torch.equal(compiled(x), x + 1)
    before = _flags._is_onnx_exporting
    _flags._is_onnx_exporting = True
    try:
        assert torch.equal(compiled(x), x - 1)  # the guard failed: captured again
    finally:
        _flags._is_onnx_exporting = before
    assert torch.equal(compiled(x), x + 1)


def test_jit_annotate_and_unwrap_optional_are_inlined():
    def f(x):
        y = torch.jit.annotate(Any, x + 1)
        if torch.jit._unwrap_optional(y) is None:
            return torch.ones(2)
        return y * 2

    assert_matches_eager(f, torch.randn(3), graphs=1)


def test_unwrap_optional_of_none_raises_as_in_eager():
    def f(x):
        return torch.jit._unwrap_optional(None)

    with pytest.raises(AssertionError, match="null optional"):
        f(torch.randn(2))
    ember.reset()
    with pytest.raises(AssertionError, match="null optional"):
        ember.compile(f, backend="eager")(torch.randn(2))


@pytest.mark.skipif(not torch.distributed.is_available(), reason="no torch.distributed")
def test_fsdp_storage_size_query_is_guarded_on_the_input_storage():
    import torch.distributed.fsdp._flat_param as flat_param

    def f(x):
        return x + 1 if flat_param._same_storage_size(x, 4) else x - 1

    assert_matches_eager(f, torch.randn(4), graphs=1)
    ember.reset()
    compiled = ember.compile(f, backend="eager")
    plain, view = torch.zeros(4), torch.zeros(8)[:4]  # same sizes and strides, other storage sizes
    assert torch.equal(compiled(plain), plain + 1)
    assert torch.equal(compiled(view), view - 1)
    assert torch.equal(compiled(plain), plain + 1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_device_properties_are_constants_in_the_graph():
    """A GPU's properties (PyTorch's test_get_device_properties_tensor_device) are fixed facts:
    their fields fold into the graph, with no graph break."""
    def f(a):
        x = a.to("cuda")
        prop = torch.cuda.get_device_properties(x.device)
        if prop.major == 8:
            return x + prop.multi_processor_count
        return x + prop.max_threads_per_multi_processor, prop.name

    assert_matches_eager(f, torch.randn(4), graphs=1)
