"""EMBER_LOGS=recompiles says which fact changed, with the value expected and the value found."""
import pytest
import torch

import ember

SCALE = 2


@pytest.fixture
def recompile_log(caplog):
    ember.reset()
    ember.logs.enable("recompiles")

    def messages() -> str:
        return "\n".join(record.getMessage() for record in caplog.records if record.name == "ember.recompiles")

    with caplog.at_level("DEBUG", logger="ember.recompiles"):
        yield messages


def test_tensor_size_dtype_and_requires_grad_show_both_values(recompile_log):
    f = ember.compile(lambda x: x + 1, backend="eager")
    f(torch.randn(4))
    f(torch.randn(5))
    assert "x.size(0) expected 4, got 5" in recompile_log()
    g = ember.compile(lambda x: x * 2, backend="eager")
    g(torch.randn(3))
    g(torch.randn(3, dtype=torch.float64))
    assert "x.dtype expected torch.float32, got torch.float64" in recompile_log()
    h = ember.compile(lambda x: x * 3, backend="eager")
    h(torch.randn(3))
    h(torch.randn(3, requires_grad=True))
    assert "x.requires_grad expected False, got True" in recompile_log()
    k = ember.compile(lambda x: x - 1, backend="eager")
    k(torch.randn(2, 3))
    k(torch.randn(3, 2).t())
    assert "x.size(0) expected 2, got 3" not in recompile_log()
    assert "x.stride() expected (3, 1), got (1, 2)" in recompile_log()


def test_python_values_and_globals_show_both_values(recompile_log):
    global SCALE

    def f(x, flag, n):
        return x * n * SCALE if flag else x

    compiled = ember.compile(f, backend="eager")
    x = torch.randn(2)
    compiled(x, True, 2)
    compiled(x, False, 2)
    assert "flag expected True, got False" in recompile_log()
    compiled(x, False, 2.0)
    assert "n expected 2 (int), got 2.0 (float)" in recompile_log()
    try:
        SCALE = 3
        torch.testing.assert_close(compiled(x, True, 2), x * 6)
    finally:
        SCALE = 2
    assert "SCALE expected 2, got 3" in recompile_log()


def test_module_paths_and_grad_mode_in_user_terms(recompile_log):
    model = torch.nn.Linear(3, 2)
    compiled = ember.compile(model, backend="eager")
    compiled(torch.randn(1, 3))
    model.weight = torch.nn.Parameter(torch.randn(4, 3))
    model.bias = torch.nn.Parameter(torch.randn(4))
    compiled(torch.randn(1, 3))
    assert "self.weight.size(0) expected 2, got 4" in recompile_log()
    with torch.no_grad():
        compiled(torch.randn(1, 3))
    assert "torch.is_grad_enabled() expected True, got False" in recompile_log()


def test_several_entries_are_numbered(recompile_log):
    f = ember.compile(lambda x: x + 1, backend="eager", dynamic=False)
    f(torch.randn(1))
    f(torch.randn(2))
    f(torch.randn(3))
    assert "entry 0: x.size(0) expected 1, got 3; entry 1: x.size(0) expected 2, got 3" in recompile_log()


def test_a_changed_size_is_marked_dynamic_in_the_users_terms(recompile_log):
    f = ember.compile(lambda x, y: x + y, backend="eager")
    f(torch.randn(4, 3), torch.randn(3))
    f(torch.randn(5, 3), torch.randn(3))
    f(torch.randn(6, 3), torch.randn(3))
    assert "x.size(0) was 4, now 5; marking it dynamic" in recompile_log()
    assert "expected 5, got 6" not in recompile_log()  # the dynamic entry took size 6


def test_a_changed_number_is_marked_dynamic_in_the_users_terms(recompile_log):

    groups = [{"lr": 0.01, "betas": (0.9, 0.999)}]
    f = ember.compile(lambda x, groups: x * groups[0]["lr"] + groups[0]["betas"][0], backend="eager")
    x = torch.randn(3)
    for lr, beta in ((0.01, 0.9), (0.02, 0.85), (0.03, 0.8)):
        groups[0]["lr"], groups[0]["betas"] = lr, (beta, 0.999)
        torch.testing.assert_close(f(x, groups), x * lr + beta)
    log = recompile_log()
    assert "groups[0]['lr'] was 0.01, now 0.02; marking it dynamic" in log
    assert "groups[0]['betas'][0] was 0.9, now 0.85; marking it dynamic" in log
    assert "expected 0.02, got 0.03" not in log  # the dynamic entry took 0.03
