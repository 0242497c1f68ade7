"""Public API: compile as call and decorator, modules, backends, config, bad input."""
import pytest
import torch

import ember


def test_compile_as_decorator_and_call():
    @ember.compile
    def f(x):
        return x.sin() + 1

    @ember.compile(backend="eager")
    def g(x):
        return x.cos()

    x = torch.randn(3)
    torch.testing.assert_close(f(x), x.sin() + 1)
    torch.testing.assert_close(g(x), x.cos())
    h = ember.compile(lambda x: x * 3, backend="aot_eager")
    torch.testing.assert_close(h(x), x * 3)


def test_module_wrapper_shares_parameters_and_state_dict():
    model = torch.nn.Linear(3, 2)
    compiled = ember.compile(model, backend="eager")
    assert isinstance(compiled, torch.nn.Module)
    assert compiled.weight is model.weight
    assert compiled.state_dict().keys() == model.state_dict().keys()
    for key, value in compiled.state_dict().items():
        assert value.data_ptr() == model.state_dict()[key].data_ptr()
    x = torch.randn(4, 3)
    torch.testing.assert_close(compiled(x), model(x))


def test_custom_backend_receives_graph_and_real_inputs():
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, example_inputs))
        return gm.forward

    f = ember.compile(lambda x: x + 1, backend=backend)
    x = torch.randn(2)
    f(x)
    gm, inputs = seen[0]
    assert isinstance(gm, torch.fx.GraphModule)
    assert inputs[0] is x


def test_disable_keeps_function_out_of_capture():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    @ember.disable
    def helper(x):
        return x * 2

    @ember.compile(backend=backend)
    def f(x):
        return helper(x + 1) - 1

    x = torch.randn(3)
    torch.testing.assert_close(f(x), (x + 1) * 2 - 1)
    assert len(graphs) == 2


def test_config_patch_is_scoped_and_typed():
    before = ember.config.recompile_limit
    with ember.config.patch(recompile_limit=2):
        assert ember.config.recompile_limit == 2
    assert ember.config.recompile_limit == before
    with pytest.raises(TypeError, match="recompile_limit takes a int"):
        ember.config.patch(recompile_limit="two")
    with pytest.raises(AttributeError, match="no setting"):
        ember.config.patch(no_such_setting=1)


def test_non_callable_is_a_type_error():
    with pytest.raises(TypeError, match="expects a function or an nn.Module"):
        ember.compile(42)


def test_unknown_backend_names_choices():
    with pytest.raises(ValueError, match="unknown ember backend 'nope'.*eager"):
        ember.compile(lambda x: x, backend="nope")


def test_backend_error_names_backend_and_graph():
    def broken(gm, example_inputs):
        raise RuntimeError("boom")

    f = ember.compile(lambda x: x + 1, backend=broken)
    with pytest.raises(ember.BackendCompilerFailed, match=r"backend 'broken' raised RuntimeError: boom(.|\n)*def forward"):
        f(torch.randn(2))
    with ember.config.patch(fallback_on_backend_error=True):
        g = ember.compile(lambda x: x + 2, backend=broken)
        with pytest.warns(UserWarning, match="running the graph eagerly"):
            torch.testing.assert_close(g(torch.ones(2)), torch.full((2,), 3.0))


def test_user_exception_is_raised_as_in_eager():
    @ember.compile(backend="eager")
    def f(x, n):
        y = x + 1
        if n < 0:
            raise ValueError(f"negative n: {n}")
        return y * n

    x = torch.randn(3)
    torch.testing.assert_close(f(x, 2), (x + 1) * 2)
    with pytest.raises(ValueError, match="negative n: -1"):
        f(x, -1)


def test_list_backends():
    assert {"eager", "aot_eager", "ember", "inductor"} <= set(ember.list_backends())


# -- compile arguments ----------------------------------------------------------------------------
def test_mode_and_options_together_are_rejected_as_torch_compile_does():
    with pytest.raises(RuntimeError, match="Either mode or options can be specified"):
        ember.compile(lambda x: x, mode="default", options={})
    with pytest.raises(RuntimeError, match="Either mode or options can be specified"):
        ember.compile(mode="max-autotune", options={"recompile_limit": 2})
    with pytest.raises(RuntimeError, match="unrecognized mode='fastest'.*reduce-overhead"):
        ember.compile(lambda x: x, mode="fastest")


def test_unknown_option_keys_are_rejected_with_the_known_ones_listed():
    with pytest.raises(RuntimeError, match=r"unexpected option\(s\) 'triton.cudagraphs'.*recompile_limit"):
        ember.compile(lambda x: x, options={"triton.cudagraphs": True})
    with pytest.raises(TypeError, match="recompile_limit takes a int"):
        ember.compile(lambda x: x, options={"recompile_limit": "2"})


@pytest.mark.parametrize("dynamic", ["yes", 1, 0, "auto"])
def test_invalid_dynamic_is_a_type_error_naming_the_accepted_values(dynamic):
    with pytest.raises(TypeError, match="dynamic must be True, False or None"):
        ember.compile(lambda x: x, dynamic=dynamic)


def test_every_mode_is_accepted_and_compiles():
    x = torch.randn(3)
    for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        torch.testing.assert_close(ember.compile(lambda x: x.sin(), mode=mode, backend="eager")(x), x.sin())


def test_options_are_config_settings_scoped_to_the_compiled_function():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    limited = ember.compile(lambda x: x * 2, backend=backend, options={"recompile_limit": 1})
    unlimited = ember.compile(lambda x: x * 3, backend=backend, dynamic=False)
    with pytest.warns(UserWarning, match="recompile_limit"):
        for size in (1, 2, 3):
            torch.testing.assert_close(limited(torch.ones(size)), torch.full((size,), 2.0))
    assert len(graphs) == 1  # later shapes ran eagerly
    for size in (1, 2, 3):
        unlimited(torch.ones(size))
    assert len(graphs) == 4  # the global limit still applies to the other function
    assert ember.config.recompile_limit == 8

    def broken(gm, example_inputs):
        raise RuntimeError("boom")

    forgiving = ember.compile(lambda x: x + 1, backend=broken, options={"fallback_on_backend_error": True})
    with pytest.warns(UserWarning, match="running the graph eagerly"):
        torch.testing.assert_close(forgiving(torch.ones(2)), torch.full((2,), 2.0))
    assert ember.config.fallback_on_backend_error is False


def test_reset_makes_already_compiled_functions_and_modules_recompile():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    f = ember.compile(lambda x: x + 1, backend=backend)
    model = ember.compile(torch.nn.Linear(2, 2), backend=backend)
    x = torch.randn(2)
    f(x), model(x)
    f(x), model(x)
    assert len(graphs) == 2
    ember.reset()
    f(x), model(x)
    assert len(graphs) == 4
    assert ember.counters["stats"]["unique_graphs"] == 2


def test_reset_also_revives_a_function_past_its_recompile_limit():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    f = ember.compile(lambda x: x + 1, backend=backend, options={"recompile_limit": 1})
    f(torch.ones(1))
    with pytest.warns(UserWarning, match="recompile_limit"):
        f(torch.ones(2))
    assert len(graphs) == 1
    ember.reset()
    f(torch.ones(2))
    assert len(graphs) == 2


@pytest.mark.parametrize("variable", ["EMBER_DISABLE", "TORCH_COMPILE_DISABLE"])
def test_disable_environment_variable_makes_compile_return_the_original(variable, monkeypatch):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x):
        return x.sin()

    model = torch.nn.Linear(2, 2)
    monkeypatch.setenv(variable, "1")  # read when ember.compile is called, not only at import
    assert ember.compile(f, backend=backend) is f
    assert ember.compile(model, backend=backend) is model
    assert ember.compile(backend=backend)(f) is f
    monkeypatch.setenv(variable, "0")
    compiled = ember.compile(f, backend=backend)
    assert compiled is not f
    compiled(torch.randn(2))
    assert len(graphs) == 1


def test_config_disable_also_stops_functions_compiled_before_it():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    @ember.compile(backend=backend)
    def f(x):
        return x.cos()

    x = torch.randn(3)
    with ember.config.patch(disable=True):
        torch.testing.assert_close(f(x), x.cos())
        assert graphs == []
        assert ember.compile(torch.sin) is torch.sin
    f(x)
    assert len(graphs) == 1


def test_config_disable_defaults_from_the_environment_at_import():
    import os
    import subprocess
    import sys

    env = dict(os.environ, TORCH_COMPILE_DISABLE="1")
    env.pop("EMBER_DISABLE", None)
    out = subprocess.run([sys.executable, "-c", "import ember; print(ember.config.disable)"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_tuning_knobs_are_config_settings_defaulting_from_the_environment():
    """The environment variables that tune the compiler are ember.config settings (patchable, in
    EMBER_CONFIG), their defaults read from the variables at import."""
    import os
    import subprocess
    import sys

    names = {"EMBER_MAX_KERNEL_BUFFERS": ("max_kernel_buffers", "7", 7),
             "EMBER_COMPILE_WORKERS": ("compile_workers", "0", 0),
             "EMBER_COMPILE_PREWARM": ("compile_prewarm", "0", False),
             "EMBER_BEGIN_BACKWARD": ("begin_backward", "0", False),
             "EMBER_RECOMPUTE_NEAR_USE": ("recompute_near_use", "0", False),
             "EMBER_TRITON_DIRECT": ("triton_direct_launch", "0", False),
             "EMBER_TRITON_ELIDE_STORES": ("triton_elide_stores", "0", False)}
    env = {**os.environ, **{variable: raw for variable, (_, raw, _) in names.items()}}
    code = "import ember; print(repr([getattr(ember.config, n) for n in %r]))" % [n for n, _, _ in names.values()]
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == repr([value for _, _, value in names.values()])
    defaults = {variable: None for variable in names}
    clean = {k: v for k, v in os.environ.items() if k not in defaults}
    out = subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True, check=True).stdout
    max_buffers, workers, *flags = eval(out)
    assert max_buffers == 64 and workers == max(0, min(32, (os.cpu_count() or 1) - 1)) and all(flags)
    with ember.config.patch(max_kernel_buffers=3, triton_elide_stores=False):
        assert ember.config.max_kernel_buffers == 3 and not ember.config.triton_elide_stores
