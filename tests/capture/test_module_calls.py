"""Calling a submodule inside captured code runs what nn.Module.__call__ runs: its hooks (and the
global ones) around its forward, the instance's own forward when one was assigned, the module
behind an ember.compile'd child.  Hooks and forwards changed after compiling are seen on the next
call.  Each result is compared with eager on a copy of the model given the same changes."""
import copy
import functools
import types

import pytest
import torch
from torch import nn
from torch.nn.modules import module as module_impl

import ember

BACKENDS = ("eager", "aot_eager")


class Parent(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = nn.Linear(3, 3)
        self.other = nn.Linear(3, 3)

    def forward(self, x):
        return self.other(self.child(x)).relu() + 1


class TwiceParent(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = nn.Linear(3, 3)

    def forward(self, x):
        return self.child(self.child(x)) * 2


def _models(cls=Parent):
    torch.manual_seed(0)
    model = cls()
    return model, copy.deepcopy(model)


def _check(compiled, model, reference, x):
    """Same output and same parameter gradients as eager."""
    x_eager = x.detach().clone().requires_grad_(x.requires_grad)
    with ember.config.patch(raise_capture_errors=True):
        got = compiled(x)
    expected = reference(x_eager)
    torch.testing.assert_close(got, expected)
    if got.requires_grad:
        got.sum().backward()
        expected.sum().backward()
        for (name, param), (_, ref_param) in zip(model.named_parameters(), reference.named_parameters()):
            torch.testing.assert_close(param.grad, ref_param.grad, msg=name)
            param.grad = ref_param.grad = None


def _counting():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return graphs, backend


def _scale_output(module, args, output):
    return output * 3


def _shift_input(module, args):
    return (args[0] + 1,)


def _shift_input_kwargs(module, args, kwargs):
    return (args[0] - 2,), kwargs


def _negate_output_kwargs(module, args, kwargs, output):
    return -output


# -- hooks on submodules ----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_submodule_hooks_added_and_removed_after_compiling(backend):
    ember.reset()
    model, reference = _models()
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(2, 3)
    _check(compiled, model, reference, x)
    handles = []
    for m in (model, reference):
        handles.append(m.child.register_forward_hook(_scale_output))
    _check(compiled, model, reference, x)
    for m in (model, reference):
        handles.append(m.other.register_forward_pre_hook(_shift_input))
    _check(compiled, model, reference, x)
    for handle in handles[:2]:
        handle.remove()
    _check(compiled, model, reference, x)
    for handle in handles[2:]:
        handle.remove()
    _check(compiled, model, reference, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_submodule_hooks_are_captured_in_the_graph(backend):
    """Pre-hooks and hooks, with and without kwargs, run inside one graph with the forward."""
    ember.reset()
    model, reference = _models()
    for m in (model, reference):
        m.child.register_forward_pre_hook(_shift_input)
        m.child.register_forward_pre_hook(_shift_input_kwargs, with_kwargs=True)
        m.child.register_forward_hook(_scale_output)
        m.other.register_forward_hook(_negate_output_kwargs, with_kwargs=True)
    graphs, counting = _counting()
    x = torch.randn(2, 3, requires_grad=True)
    _check(ember.compile(model, backend=counting), model, reference, x)
    assert len(graphs) == 1
    ember.reset()
    _check(ember.compile(model, backend=backend), model, reference, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hooks_on_a_module_called_twice(backend):
    ember.reset()
    model, reference = _models(TwiceParent)
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(2, 3)
    _check(compiled, model, reference, x)
    for m in (model, reference):
        m.child.register_forward_pre_hook(_shift_input)
        m.child.register_forward_hook(_scale_output)
    _check(compiled, model, reference, x)


def test_global_hooks_added_after_compiling_apply_to_submodules():
    ember.reset()
    model, reference = _models()
    compiled = ember.compile(model, backend="eager")
    x = torch.randn(2, 3)
    _check(compiled, model, reference, x)
    calls = []

    def only_children(module, args, output):
        calls.append(type(module).__name__)
        return output + 1 if isinstance(module, nn.Linear) else output

    handle = module_impl.register_module_forward_hook(only_children)
    try:
        with ember.config.patch(raise_capture_errors=True):
            got = compiled(x)
        expected = reference(x)
        torch.testing.assert_close(got, expected)
    finally:
        handle.remove()
    _check(compiled, model, reference, x)


def test_backward_hook_on_a_submodule_is_a_graph_break_with_a_reason():
    ember.reset()
    model, reference = _models()
    seen = []
    for m in (model, reference):
        m.child.register_full_backward_hook(lambda module, grad_in, grad_out: seen.append(1))
    x = torch.randn(2, 3, requires_grad=True)
    _check(ember.compile(model, backend="aot_eager"), model, reference, x)
    assert len(seen) == 2  # fired for the compiled model and for eager
    ember.reset()
    explanation = ember.explain(model)(x)
    assert any("backward hooks" in record.reason for record in explanation.break_reasons)


def test_always_called_hook_on_a_submodule_is_a_graph_break_with_a_reason():
    ember.reset()
    model, reference = _models()
    for m in (model, reference):
        m.child.register_forward_hook(_scale_output, always_call=True)
    x = torch.randn(2, 3)
    _check(ember.compile(model, backend="eager"), model, reference, x)
    ember.reset()
    explanation = ember.explain(model)(x)
    assert any("always_call" in record.reason for record in explanation.break_reasons)


def test_recompile_log_names_the_hook_that_appeared(caplog):
    ember.reset()
    ember.logs.enable("recompiles")
    model, _ = _models()
    compiled = ember.compile(model, backend="eager")
    x = torch.randn(2, 3)
    with caplog.at_level("DEBUG", logger="ember.recompiles"):
        compiled(x)
        model.child.register_forward_hook(_scale_output)
        compiled(x)
    messages = "\n".join(record.getMessage() for record in caplog.records if record.name == "ember.recompiles")
    assert "_forward_hooks expected no hooks, got <function _scale_output>" in messages


# -- ember.compile inside a compiled model ------------------------------------------------------------
class CompiledChildParent(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = ember.compile(nn.Linear(3, 3), backend="eager")

    def forward(self, x):
        return self.child(x).relu()


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_child_module_is_captured_in_the_parents_graph(backend):
    ember.reset()
    model, reference = _models(CompiledChildParent)
    x = torch.randn(2, 3, requires_grad=True)
    explanation = ember.explain(model)(x)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation
    compiled = ember.compile(model, backend=backend)
    _check(compiled, model, reference, x)
    # hooks on the module the child wraps are captured too; hooks on the wrapper itself break
    for m in (model, reference):
        m.child._orig_mod.register_forward_hook(_scale_output)
    _check(compiled, model, reference, x)
    for m in (model, reference):
        m.child.register_forward_pre_hook(_shift_input)
    _check(compiled, model, reference, x)


def _sine(x):
    return x.sin() * 2


compiled_sine = ember.compile(_sine, backend="eager")


@functools.wraps(compiled_sine)
def wrapped_compiled_sine(x):  # carries the dispatcher's attributes; its own body must run
    return compiled_sine(x) + 10


def test_compiled_function_is_captured_in_the_callers_graph():
    def caller(x):
        return compiled_sine(x).cos()

    ember.reset()
    x = torch.randn(4)
    explanation = ember.explain(caller)(x)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation
    with ember.config.patch(raise_capture_errors=True):
        torch.testing.assert_close(ember.compile(caller, backend="aot_eager")(x), caller(x))

    def wrapped_caller(x):
        return wrapped_compiled_sine(x)

    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        torch.testing.assert_close(ember.compile(wrapped_caller, backend="eager")(x), x.sin() * 2 + 10)


# -- a forward assigned on the instance -------------------------------------------------------------------
def _times_hundred(x):
    return x * 100


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["function", "method", "partial"])
def test_instance_forward_of_the_root_module(backend, kind):
    ember.reset()
    model, reference = _models()
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(2, 3)
    _check(compiled, model, reference, x)
    for m in (model, reference):
        if kind == "function":
            m.forward = _times_hundred
        elif kind == "method":
            m.forward = types.MethodType(lambda self, x: self.child(x) * 100, m)
        else:
            m.forward = functools.partial(lambda module, x: module.other(x) - 5, m)
    _check(compiled, model, reference, x)
    for m in (model, reference):
        m.register_forward_hook(_scale_output)
    _check(compiled, model, reference, x)
    for m in (model, reference):
        del m.forward
    _check(compiled, model, reference, x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["function", "method", "partial"])
def test_instance_forward_of_a_submodule(backend, kind):
    ember.reset()
    model, reference = _models()
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(2, 3, requires_grad=True)
    _check(compiled, model, reference, x)
    for m in (model, reference):
        child = m.child
        if kind == "function":
            child.forward = _times_hundred
        elif kind == "method":
            child.forward = types.MethodType(lambda self, x: nn.functional.linear(x, self.weight) * 100, child)
        else:
            child.forward = functools.partial(lambda module, x: module.weight.sum() * x, child)
    _check(compiled, model, reference, x)
    for m in (model, reference):
        m.child.register_forward_hook(_scale_output)
    _check(compiled, model, reference, x)
    for m in (model, reference):
        del m.child.forward
    _check(compiled, model, reference, x)


def test_instance_forward_set_before_compiling():
    ember.reset()
    model, reference = _models()
    for m in (model, reference):
        m.forward = types.MethodType(lambda self, x: self.child(x) - self.other(x), m)
        m.other.forward = _times_hundred
    graphs, counting = _counting()
    x = torch.randn(2, 3)
    _check(ember.compile(model, backend=counting), model, reference, x)
    assert len(graphs) == 1


class HalvingLinear(nn.Linear):
    """A module class with its own __call__ (around nn.Module's)."""

    def __call__(self, *args, **kwargs):
        return super().__call__(*args, **kwargs) / 2


class HalvingParent(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = HalvingLinear(3, 3)

    def forward(self, x):
        return self.child(x) + 1


def test_submodule_class_with_its_own_call():
    ember.reset()
    model, reference = _models(HalvingParent)
    graphs, counting = _counting()
    x = torch.randn(2, 3)
    compiled = ember.compile(model, backend=counting)
    _check(compiled, model, reference, x)
    assert len(graphs) == 1
    for m in (model, reference):
        m.child.register_forward_hook(_scale_output)
    _check(compiled, model, reference, x)


class TracedChildParent(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = torch.fx.symbolic_trace(nn.Sequential(nn.Linear(3, 3), nn.Tanh()))

    def forward(self, x):
        return self.child(x) * 2


def test_fx_graph_module_child_is_inlined():
    """fx.GraphModule's own __call__ only adds error messages: its forward is inlined as before."""
    ember.reset()
    model, reference = _models(TracedChildParent)
    graphs, counting = _counting()
    x = torch.randn(2, 3, requires_grad=True)
    _check(ember.compile(model, backend=counting), model, reference, x)
    assert len(graphs) == 1
