"""ember.compile(module): state_dict keys, copies, attributes and hooks act on the original model."""
import copy
import io
import pickle

import pytest
import torch

import ember


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)
        self.norm = torch.nn.BatchNorm1d(3)
        self.scale = 2.0

    def forward(self, x):
        return self.norm(self.fc(x)).relu() * self.scale


def _parent() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 3), Block())


def _counting_backend():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return graphs, backend


def _randomized(state_dict: dict) -> dict:
    return {key: torch.rand_like(value) + 0.5 if value.is_floating_point() else value + 1
            for key, value in state_dict.items()}


# -- state_dict ------------------------------------------------------------------------------------
def test_parent_with_compiled_submodule_round_trips_its_state_dict():
    parent = _parent()
    parent[1] = ember.compile(parent[1], backend="eager")
    saved = _randomized(parent.state_dict())
    parent.load_state_dict(saved)
    for key, value in parent.state_dict().items():
        torch.testing.assert_close(value, saved[key])


def test_state_dict_keys_are_the_plain_models_so_checkpoints_move_both_ways():
    plain = _parent()
    compiled_parent = _parent()
    compiled_parent[1] = ember.compile(compiled_parent[1], backend="eager")
    assert list(compiled_parent.state_dict()) == list(plain.state_dict())
    # plain checkpoint -> compiled model, and compiled checkpoint -> plain model
    checkpoint = _randomized(plain.state_dict())
    compiled_parent.load_state_dict(checkpoint)
    plain.load_state_dict(compiled_parent.state_dict())
    x = torch.randn(4, 3)
    plain.eval(), compiled_parent.eval()
    torch.testing.assert_close(compiled_parent(x), plain(x))


def test_torch_compile_prefixed_checkpoints_load_too():
    # torch.compile's wrapper names the original `_orig_mod`: its keys carry that prefix.
    reference = _parent()
    reference[1] = torch.compile(reference[1], backend="eager")
    torch_keys = list(reference.state_dict())
    assert "1._orig_mod.fc.weight" in torch_keys
    reference.load_state_dict(reference.state_dict())  # torch's own round trip works
    checkpoint = _randomized(reference.state_dict())
    parent = _parent()
    parent[1] = ember.compile(parent[1], backend="eager")
    parent.load_state_dict(checkpoint)
    torch.testing.assert_close(parent.state_dict()["1.fc.weight"], checkpoint["1._orig_mod.fc.weight"])
    root = ember.compile(Block(), backend="eager")
    root_checkpoint = _randomized(torch.compile(Block(), backend="eager").state_dict())
    root.load_state_dict(root_checkpoint)
    torch.testing.assert_close(root.state_dict()["fc.weight"], root_checkpoint["_orig_mod.fc.weight"])


def test_load_errors_name_keys_as_the_checkpoint_does():
    parent = _parent()
    parent[1] = ember.compile(parent[1], backend="eager")
    checkpoint = dict(parent.state_dict())
    del checkpoint["1.fc.weight"]
    checkpoint["1.extra"] = torch.zeros(1)
    with pytest.raises(RuntimeError) as error:
        parent.load_state_dict(checkpoint)
    assert '"1.fc.weight"' in str(error.value) and '"1.extra"' in str(error.value)
    result = parent.load_state_dict(checkpoint, strict=False)
    assert result.missing_keys == ["1.fc.weight"] and result.unexpected_keys == ["1.extra"]


# -- copies ----------------------------------------------------------------------------------------
def _round_trips():
    def torch_save(module):
        buffer = io.BytesIO()
        torch.save(module, buffer)
        buffer.seek(0)
        return torch.load(buffer, weights_only=False)

    return {"deepcopy": copy.deepcopy, "pickle": lambda module: pickle.loads(pickle.dumps(module)),
            "torch.save": torch_save}


@pytest.mark.parametrize("how", ["deepcopy", "pickle", "torch.save"])
def test_copies_are_compiled_modules_of_a_copied_model(how):
    model = Block().eval()
    compiled = ember.compile(model, backend="aot_eager")
    x = torch.randn(4, 3)
    expected = compiled(x)
    copied = _round_trips()[how](compiled)
    assert isinstance(copied, ember.OptimizedModule)
    assert copied._orig_mod is not model and copied.fc.weight is not model.fc.weight
    torch.testing.assert_close(copied(x), expected)
    assert copied._ember_context is not compiled._ember_context  # a fresh cache
    assert copied._ember_context.backend_name == "aot_eager"
    with torch.no_grad():
        copied.fc.weight.zero_()  # the copy owns its parameters
    torch.testing.assert_close(compiled(x), expected)


def test_deepcopy_of_a_parent_keeps_the_compiled_submodule():
    parent = _parent().eval()
    parent[1] = ember.compile(parent[1], backend="eager")
    copied = copy.deepcopy(parent)
    assert isinstance(copied[1], ember.OptimizedModule)
    x = torch.randn(2, 3)
    torch.testing.assert_close(copied(x), parent(x))


# -- attributes ------------------------------------------------------------------------------------
def test_setting_an_attribute_on_the_compiled_module_reaches_the_model_and_recompiles():
    graphs, backend = _counting_backend()
    model = Block().eval()
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(4, 3)
    torch.testing.assert_close(compiled(x), model(x))
    compiled.scale = 5.0
    assert model.scale == 5.0 and "scale" not in compiled.__dict__
    torch.testing.assert_close(compiled(x), model(x))
    assert len(graphs) == 2
    compiled.extra = 1
    assert model.extra == 1
    del compiled.extra
    assert not hasattr(model, "extra")


def test_train_and_eval_through_the_compiled_module_switch_the_model():
    model = Block()
    compiled = ember.compile(model, backend="eager")
    compiled.eval()
    assert not model.training and not model.norm.training and not compiled.training
    compiled.train()
    assert model.training and compiled.training
    compiled.training = False
    assert not model.training


# -- hooks -----------------------------------------------------------------------------------------
def test_forward_hooks_run_once_inside_the_captured_graph():
    graphs, backend = _counting_backend()
    model = torch.nn.Linear(3, 3)
    calls = []

    def pre_hook(module, args):
        calls.append("pre")
        return (args[0] * 2,)

    def hook(module, args, output):
        calls.append("post")
        return output + 1

    model.register_forward_pre_hook(pre_hook)
    model.register_forward_hook(hook)
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(2, 3)
    expected = model(x)
    calls.clear()
    torch.testing.assert_close(compiled(x), expected)
    assert calls == ["pre", "post"]
    assert len(graphs) == 1
    targets = [str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"]
    assert any("mul" in target for target in targets) and any("add" in target for target in targets)
    calls.clear()
    compiled(x)
    assert calls == ["pre", "post"] and len(graphs) == 1


def test_adding_and_removing_hooks_after_compiling_is_noticed():
    graphs, backend = _counting_backend()
    model = torch.nn.Linear(3, 3)
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), model(x))
    handle = model.register_forward_hook(lambda module, args, output: output * 10)
    torch.testing.assert_close(compiled(x), model(x))
    assert len(graphs) == 2  # the hook is captured with the forward
    kw_handle = model.register_forward_pre_hook(lambda module, args, kwargs: ((args[0] - 1,), kwargs),
                                                with_kwargs=True)
    torch.testing.assert_close(compiled(x), model(x))
    assert len(graphs) == 3
    handle.remove()
    torch.testing.assert_close(compiled(x), model(x))
    kw_handle.remove()
    torch.testing.assert_close(compiled(x), x @ model.weight.t() + model.bias)
    assert len(graphs) == 4  # the hook-free entry was kept


def test_global_forward_hooks_are_captured_and_fire_once():
    graphs, backend = _counting_backend()
    model = torch.nn.Linear(3, 3)
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(2, 3)
    fired = []

    def hook(module, args, output):
        fired.append(type(module).__name__)
        return output * 3

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        expected = model(x)
        fired.clear()
        torch.testing.assert_close(compiled(x), expected)
    finally:
        handle.remove()
    assert fired == ["Linear"]
    assert len(graphs) == 1


def test_backward_hooks_run_eagerly_with_a_reason(caplog):
    model = torch.nn.Linear(3, 3)
    seen = []
    model.register_full_backward_hook(lambda module, grad_in, grad_out: seen.append(grad_out[0].shape))
    x = torch.randn(2, 3, requires_grad=True)
    explanation = ember.explain(model)(x)
    assert any("backward hooks" in item for item in explanation.frames_run_eagerly)
    ember.logs.enable("fallbacks")
    compiled = ember.compile(model, backend="eager")
    with caplog.at_level("DEBUG", logger="ember.fallbacks"):
        compiled(x).sum().backward()
    assert seen == [torch.Size([2, 3])]
    assert any("Linear has backward hooks" in record.getMessage() for record in caplog.records)
