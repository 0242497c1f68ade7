"""A list the captured code only appends to (a log) is not read: its length and items are not
guarded, so it growing between calls does not recompile, and its items do not become inputs."""
import warnings

import pytest
import torch
from torch import nn

import ember

BACKENDS = ("eager", "aot_eager")

LOG = []


def _counting():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return graphs, backend


def _log_output(module, args, output):
    LOG.append(output.detach() * 2)


class Parent(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = nn.Linear(3, 3)

    def forward(self, x):
        return self.child(x).relu()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("hooked", ["root", "submodule"])
def test_forward_hook_appending_to_a_global_list_compiles_once(backend, hooked):
    ember.reset()
    LOG.clear()
    torch.manual_seed(0)
    model = Parent()
    (model if hooked == "root" else model.child).register_forward_hook(_log_output)
    x = torch.randn(2, 3)
    compiled = ember.compile(model, backend=backend)
    with warnings.catch_warnings(), ember.config.patch(raise_capture_errors=True):
        warnings.simplefilter("error")  # past the recompile limit ember warns
        for _ in range(12):
            compiled(x)
    assert ember.counters["stats"]["captures"] == 1, ember.counters["stats"]
    assert len(LOG) == 12
    expected = (model if hooked == "root" else model.child)(x).detach() * 2  # eager
    for item in LOG[:12]:
        torch.testing.assert_close(item, expected)
    LOG.clear()


@pytest.mark.parametrize("backend", BACKENDS)
def test_append_and_extend_to_an_argument(backend):
    def f(x, log):
        y = x.sin()
        log.append(y)
        log.extend([y + 1, 3])
        return y * 2

    ember.reset()
    graphs, counting = _counting()
    compiled = ember.compile(f, backend=counting)
    eager_log, compiled_log = [], []
    x = torch.randn(4)
    with ember.config.patch(raise_capture_errors=True):
        for _ in range(5):
            torch.testing.assert_close(compiled(x, compiled_log), f(x, eager_log))
    assert len(graphs) == 1
    assert len(compiled_log) == len(eager_log) == 15
    for got, expected in zip(compiled_log, eager_log):
        if isinstance(expected, torch.Tensor):
            torch.testing.assert_close(got, expected)
        else:
            assert got == expected
    ember.reset()
    compiled = ember.compile(f, backend=backend)
    log = [torch.ones(4)]  # items it held before are left as they are
    with ember.config.patch(raise_capture_errors=True):
        compiled(x, log)
    assert len(log) == 4 and log[0] is not None and torch.equal(log[0], torch.ones(4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_list_that_is_read_is_still_guarded(backend):
    def f(x, log):
        log.append(x)
        return x * len(log) + log[0]

    ember.reset()
    compiled = ember.compile(f, backend=backend)
    x = torch.randn(3)
    with ember.config.patch(raise_capture_errors=True):
        for start in ([], [torch.ones(3)], [], [torch.ones(3), torch.zeros(3)]):
            eager_log, compiled_log = list(start), list(start)
            torch.testing.assert_close(compiled(x, compiled_log), f(x, eager_log))
            assert len(compiled_log) == len(eager_log)


def test_appending_then_a_graph_break():
    def f(x, log):
        log.append(x * 2)
        ember.graph_break()
        return log[-1] + len(log)

    ember.reset()
    compiled = ember.compile(f, backend="eager")
    x = torch.randn(3)
    with ember.config.patch(raise_capture_errors=True):
        for start in ([], [torch.ones(3)]):
            eager_log, compiled_log = list(start), list(start)
            torch.testing.assert_close(compiled(x, compiled_log), f(x, eager_log))
            assert len(compiled_log) == len(eager_log)


def test_a_global_list_rebound_after_compiling():
    global LOG

    def f(x):
        LOG.append(x + 1)
        return x

    ember.reset()
    compiled = ember.compile(f, backend="eager")
    x = torch.randn(2)
    old = LOG
    try:
        with ember.config.patch(raise_capture_errors=True):
            compiled(x)
            LOG = []
            compiled(x)
        assert len(old) == 1 and len(LOG) == 1
    finally:
        LOG = old
        LOG.clear()
