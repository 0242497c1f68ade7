"""Values and sizes only the graph computes: `.item()` under `capture_scalar_outputs` and
nonzero / boolean masks / masked_select under `capture_dynamic_output_shape_ops` are captured
with unbacked symbols (no graph break, as torch.compile with the same two flags); where such a
value leaves the graph or decides a branch, the frame breaks there instead, results unchanged."""
import pytest
import torch

import ember

from capture_helpers import assert_matches_eager, assert_same_value

FLAGS = dict(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True)


def _scaled_by_item(x):
    n = x.sum().item()
    return x * n + 1, (x - n).relu()


def _masks(x):
    positive = x > 0
    return (torch.nonzero(positive).sum() + x[positive].sum(), x[positive] * 2,
            torch.masked_select(x, ~positive).exp(), x.nonzero(as_tuple=True)[0])


def _item_returned(x):
    return x.sum().item(), x * 2


def _branch_on_item(x):
    if x.sum().item() > 0:
        return x + 1
    return x - 1


def _run(fn, x, backend, fullgraph, **flags):
    ember.reset()
    with ember.config.patch(**flags):
        explanation = ember.explain(fn)(x.clone())
        ember.reset()
        got = ember.compile(fn, backend=backend, fullgraph=fullgraph)(x.clone())
    assert_same_value(fn(x.clone()), got)
    return explanation


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "ember"])
@pytest.mark.parametrize("fn", [_scaled_by_item, _masks], ids=["item", "masks"])
def test_data_dependent_values_are_captured_under_fullgraph_with_the_flags(fn, backend):
    torch.manual_seed(0)
    for x in (torch.randn(7), torch.randn(5).abs(), -torch.randn(6).abs()):
        explanation = _run(fn, x, backend, fullgraph=True, **FLAGS)
        assert explanation.graph_count == 1 and explanation.graph_break_count == 0


@pytest.mark.parametrize("fn", [_scaled_by_item, _masks], ids=["item", "masks"])
def test_without_the_flags_data_dependent_values_break_the_graph(fn):
    explanation = _run(fn, torch.randn(7), "eager", fullgraph=False)
    assert explanation.graph_break_count >= 1


@pytest.mark.parametrize("fn", [_item_returned, _branch_on_item], ids=["returned", "branch"])
def test_an_item_leaving_the_graph_or_deciding_a_branch_breaks_there(fn):
    for x in (torch.randn(4).abs(), -torch.randn(4).abs()):
        explanation = _run(fn, x, "aot_eager", fullgraph=False, **FLAGS)
        assert explanation.graph_break_count >= 1
        assert not explanation.frames_run_eagerly


def _converts(x, y):
    x = x + 1
    number = float(x)
    count = int(y)
    x.add_(10)  # after the conversion: eager's number is the one before
    return number, count, x


def test_float_and_int_of_a_one_element_tensor_are_converted_by_the_glue():
    for x, y in [(torch.tensor([1.5]), torch.tensor([3])), (torch.tensor(2.0), torch.tensor(True))]:
        compiled = ember.compile(_converts, backend="eager", fullgraph=True)
        got, expected = compiled(x.clone(), y), _converts(x.clone(), y)
        assert type(got[0]) is float and type(got[1]) is int
        assert got[:2] == expected[:2]
        torch.testing.assert_close(got[2], expected[2])


def test_float_of_a_tensor_of_several_elements_raises_eagers_value_error():
    compiled = ember.compile(_converts, backend="eager", fullgraph=True)
    with pytest.raises(ValueError, match="only one element tensors"):
        compiled(torch.ones(2), torch.tensor([1]))


def _int_of_float(x):
    return int(x) + 1


def test_int_of_a_float_tensor_still_breaks():
    # (int(nan) raises: converted after the graph, the raise would move)
    assert_matches_eager(_int_of_float, torch.tensor([2.5]), breaks=None)
