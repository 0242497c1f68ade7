"""Guards: what recompiles, what does not, and that stale graphs never give wrong results."""
import warnings

import pytest
import torch

import ember

SCALE = 2


def _counting():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return graphs, backend


def test_same_inputs_never_recompile():
    ember.reset()
    graphs, backend = _counting()
    f = ember.compile(lambda x, y: x * y + 1, backend=backend)
    for _ in range(20):
        f(torch.randn(4), torch.randn(4))
    assert len(graphs) == 1
    assert ember.counters["stats"]["recompiles"] == 0


@pytest.mark.parametrize("change", ["dtype", "shape", "requires_grad", "grad_mode", "ndim"])
def test_tensor_and_global_state_changes_recompile(change):
    ember.reset()
    graphs, backend = _counting()
    f = ember.compile(lambda x: (x * 2).sum(), backend=backend)
    x = torch.randn(4)
    f(x)
    if change == "dtype":
        y = torch.randn(4, dtype=torch.float64)
    elif change == "shape":
        y = torch.randn(5)
    elif change == "requires_grad":
        y = torch.randn(4, requires_grad=True)
    elif change == "ndim":
        y = torch.randn(2, 2)
    else:
        y = torch.randn(4)
    if change == "grad_mode":
        with torch.no_grad():
            result = f(y)
    else:
        result = f(y)
    torch.testing.assert_close(result, (y * 2).sum())
    assert len(graphs) == 2


def test_global_constant_change_recompiles_and_stays_correct():
    global SCALE
    ember.reset()
    graphs, backend = _counting()

    def f(x):
        return x * SCALE

    compiled = ember.compile(f, backend=backend)
    x = torch.randn(3)
    try:
        SCALE = 2
        torch.testing.assert_close(compiled(x), x * 2)
        SCALE = 3
        torch.testing.assert_close(compiled(x), x * 3)
        SCALE = 2
        torch.testing.assert_close(compiled(x), x * 2)
    finally:
        SCALE = 2
    assert len(graphs) == 2


def test_module_training_flag_recompiles():
    ember.reset()
    graphs, backend = _counting()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(2, 4)
    model.eval()
    torch.testing.assert_close(compiled(x), model(x))
    model.train()
    torch.manual_seed(0)
    expected = model(x)
    torch.manual_seed(0)
    torch.testing.assert_close(compiled(x), expected)
    assert len(graphs) == 2


def test_python_constant_argument_change_recompiles():
    ember.reset()
    graphs, backend = _counting()
    f = ember.compile(lambda x, n: x + n, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(f(x, 1), x + 1)
    torch.testing.assert_close(f(x, 2), x + 2)
    torch.testing.assert_close(f(x, 2.0), x + 2.0)
    assert len(graphs) == 3


def test_recompile_limit_falls_back_to_eager_with_one_warning():
    ember.reset()
    graphs, backend = _counting()
    # (dynamic=False: a changing int stays a guarded constant, see test_dynamic_scalars.py)
    f = ember.compile(lambda x, n: x + n, backend=backend, dynamic=False)
    x = torch.randn(3)
    with ember.config.patch(recompile_limit=3):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for n in range(8):
                torch.testing.assert_close(f(x, n), x + n)
    assert len(graphs) == 3
    assert len([w for w in caught if "recompile_limit" in str(w.message)]) == 1


def test_swapped_parameter_shape_never_uses_a_stale_graph():
    ember.reset()
    model = torch.nn.Linear(4, 3)
    compiled = ember.compile(model, backend="eager")
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), model(x))
    model.weight = torch.nn.Parameter(torch.randn(5, 4))
    model.bias = torch.nn.Parameter(torch.randn(5))
    torch.testing.assert_close(compiled(x), model(x))


def test_guard_log_names_the_changed_fact(caplog):
    ember.reset()
    ember.logs.enable("recompiles")
    f = ember.compile(lambda x: x + 1, backend="eager")
    f(torch.randn(3))
    with caplog.at_level("DEBUG", logger="ember.recompiles"):
        f(torch.randn(3, dtype=torch.float64))
    assert any("float32" in record.getMessage() for record in caplog.records)


class _Slotted:
    __slots__ = ("flag",)

    def __init__(self, flag):
        self.flag = flag


def _branch_on_field(x, obj):
    if obj.flag if isinstance(obj, _Slotted) else obj.result:
        return torch.cos(x)
    return torch.sin(x)


def test_slot_and_pybind_field_values_are_guarded():
    # A slot (member descriptor) or a pybind11 field (a property with a C++ getter) is read
    # for real at capture: a later call with another value must not reuse the graph.
    make_pybind = torch._C._dynamo.guards.GuardDebugInfo
    for make in (_Slotted, lambda flag: make_pybind(flag, ["a==1"], 0)):
        ember.reset()
        graphs, backend = _counting()
        compiled = ember.compile(_branch_on_field, backend=backend, fullgraph=True)
        x = torch.randn(4)
        for flag in (True, False, True):
            torch.testing.assert_close(compiled(x, make(flag)), _branch_on_field(x, make(flag)))
        assert len(graphs) == 2


def _reads_one_item(x, y):
    return torch.sin(x) * y[1]


def test_only_the_items_of_a_dict_or_tuple_argument_the_frame_reads_are_guarded():
    ember.reset()
    compiled = ember.compile(_reads_one_item, backend="eager")
    x = torch.randn(3)
    for first, unread_change, read_change in [({1: 1, 2: 2}, {1: 1, 2: 3}, {1: 5, 2: 3}),
                                              ((1, 2, 3), (11, 2, 13), (1, 7, 3))]:
        torch.testing.assert_close(compiled(x, first), _reads_one_item(x, first))
        with ember.set_stance("fail_on_recompile"):  # another value nothing reads: no capture
            torch.testing.assert_close(compiled(x, unread_change), _reads_one_item(x, unread_change))
        # the value read changed: captured again, never the stale graph
        torch.testing.assert_close(compiled(x, read_change), _reads_one_item(x, read_change))
    with pytest.raises(Exception):  # a tuple of another length is still guarded
        with ember.set_stance("fail_on_recompile"):
            compiled(x, (1, 2))
