"""ember.set_stance: force_eager, eager_on_recompile, fail_on_recompile, force_backend, and its forms."""
import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def default_stance_after_each_test():
    yield
    ember.set_stance("default")


def counting(graphs):
    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return backend


def test_force_eager_runs_the_original_without_capturing():
    graphs = []

    @ember.compile(backend=counting(graphs))
    def f(x):
        return x.sin() + 1

    x = torch.randn(3)
    with ember.set_stance("force_eager"):
        torch.testing.assert_close(f(x), x.sin() + 1)
    assert graphs == []
    f(x)  # back to the default stance: captured now
    assert len(graphs) == 1


def test_force_eager_also_skips_cached_entries_and_works_for_modules():
    runs = []

    def backend(gm, example_inputs):
        def run(*args):
            runs.append(gm)
            return gm.forward(*args)
        return run

    model = torch.nn.Linear(3, 2)
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(4, 3)
    compiled(x)
    assert len(runs) == 1
    ember.set_stance("force_eager")  # a plain call: in force until changed
    torch.testing.assert_close(compiled(x), model(x))
    assert len(runs) == 1  # the cached entry would have matched, but did not run
    ember.set_stance("default")
    compiled(x)
    assert len(runs) == 2


def test_eager_on_recompile_uses_cached_entries_and_runs_new_inputs_eagerly():
    graphs = []

    @ember.compile(backend=counting(graphs), dynamic=False)
    def f(x):
        return x * 2

    f(torch.randn(3))
    assert len(graphs) == 1
    with ember.set_stance("eager_on_recompile"):
        x = torch.randn(5)  # another size: would recompile
        torch.testing.assert_close(f(x), x * 2)
        assert len(graphs) == 1
        f(torch.randn(3))  # the cached entry still runs
    f(torch.randn(5))
    assert len(graphs) == 2


def test_eager_on_recompile_is_honoured_where_the_entry_was_used():
    calls = []

    def backend(gm, example_inputs):
        def run(*args):
            calls.append(len(args))
            return gm.forward(*args)
        return run

    @ember.compile(backend=backend, dynamic=False)
    def f(x):
        return x + 1

    f(torch.randn(2))
    with ember.set_stance("eager_on_recompile"):
        f(torch.randn(2))
        f(torch.randn(7))
    assert len(calls) == 2  # first call and the cached hit; the size-7 call ran eagerly


def test_fail_on_recompile_raises_naming_the_function_and_the_failed_guard():
    @ember.compile(backend="eager", dynamic=False)
    def scale_rows(x):
        return x * 3

    scale_rows(torch.randn(4))
    with ember.set_stance("fail_on_recompile"):
        torch.testing.assert_close(scale_rows(torch.ones(4)), torch.full((4,), 3.0))
        with pytest.raises(ember.RecompileError, match="scale_rows") as caught:
            scale_rows(torch.randn(6))
    assert "fail_on_recompile" in str(caught.value)
    assert "6" in str(caught.value)  # the reason names the size that changed
    scale_rows(torch.randn(6))  # the default stance again: recompiles


def test_fail_on_recompile_also_refuses_a_first_capture():
    @ember.compile(backend="eager")
    def never_run(x):
        return x - 1

    with ember.set_stance("fail_on_recompile"):
        with pytest.raises(ember.RecompileError, match="never_run"):
            never_run(torch.randn(2))


def test_set_stance_as_a_decorator_applies_only_while_the_function_runs():
    graphs = []

    @ember.compile(backend=counting(graphs))
    def f(x):
        return x.cos()

    @ember.set_stance("force_eager")
    def run_eagerly(x):
        return f(x)

    assert ember.stance.get_stance().stance == "default"  # decorating did not change the stance
    x = torch.randn(3)
    torch.testing.assert_close(run_eagerly(x), x.cos())
    assert graphs == []
    assert ember.stance.get_stance().stance == "default"
    f(x)
    assert len(graphs) == 1


def test_context_manager_restores_the_stance_it_found():
    ember.set_stance("eager_on_recompile")
    with ember.set_stance("force_eager"):
        assert ember.stance.get_stance().stance == "force_eager"
    assert ember.stance.get_stance().stance == "eager_on_recompile"


def test_unknown_stance_is_a_value_error_listing_the_valid_ones():
    with pytest.raises(ValueError, match="force_eager.*eager_on_recompile.*fail_on_recompile"):
        ember.set_stance("fast")
    with pytest.raises(ValueError, match="force_backend"):
        ember.set_stance("force_eager", force_backend="eager")
    assert ember.stance.get_stance().stance == "default"


def test_force_backend_compiles_new_captures_with_that_backend():
    graphs, forced = [], []

    @ember.compile(backend=counting(graphs))
    def f(x):
        return x.exp()

    x = torch.randn(3)
    f(x)
    with ember.set_stance(force_backend=counting(forced)):
        torch.testing.assert_close(f(x), x.exp())
    assert len(graphs) == 1 and len(forced) == 1
    f(x)  # the entry compiled with the function's own backend is used again
    assert len(graphs) == 1


def test_skip_guard_eval_unsafe_runs_the_single_entry_without_its_guards():
    @ember.compile(backend="eager", dynamic=False)
    def f(x, flag):
        return x + 1 if flag else x - 1

    x = torch.zeros(2)
    f(x, True)
    with ember.set_stance(skip_guard_eval_unsafe=True):
        # unsafe by design: the guard on `flag` is not checked, the one entry runs
        torch.testing.assert_close(f(x, False), x + 1)
    torch.testing.assert_close(f(x, False), x - 1)
