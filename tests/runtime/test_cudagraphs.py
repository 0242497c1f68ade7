"""mode="reduce-overhead": compiled GPU graphs replayed as CUDA graphs (ember/runtime/cudagraphs.py)."""
import contextlib

import pytest
import torch

import ember
from ember.api import MODE_SETTINGS

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")


def _mlp(device):
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(64, 64), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers).to(device)


def test_modes_name_their_settings():
    assert MODE_SETTINGS["reduce-overhead"] == {"cudagraphs": True}
    assert MODE_SETTINGS["default"] == {} and MODE_SETTINGS["max-autotune-no-cudagraphs"] == {}


def test_cpu_graphs_are_not_wrapped():
    """CUDA graphs are for CUDA graphs only: on the CPU reduce-overhead compiles as default."""
    model = _mlp("cpu")
    compiled = ember.compile(model, mode="reduce-overhead")
    x = torch.randn(1, 64)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x))


@contextlib.contextmanager
def _spied_runners():
    """The CudaGraphRunners made while inside, in order."""
    from ember.runtime.cudagraphs import CudaGraphRunner

    runners = []
    original = CudaGraphRunner.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        runners.append(self)

    CudaGraphRunner.__init__ = spy
    try:
        yield runners
    finally:
        CudaGraphRunner.__init__ = original


@cuda
def test_replays_match_eager_with_fresh_inputs_and_outputs_survive_the_next_call():
    model = _mlp("cuda")
    compiled = ember.compile(model, mode="reduce-overhead")
    with _spied_runners() as runners, torch.no_grad():
        results = []
        for step in range(6):
            x = torch.randn(1, 64, device="cuda")  # (a new address every call: copied in)
            results.append((compiled(x), model(x)))
        for got, expected in results:  # (earlier outputs are not overwritten by later replays)
            torch.testing.assert_close(got, expected)
    runner = runners[0]
    assert runner.graph is not None and runner.disabled is None and 0 in runner.copied
    # (the results are all kept: two recordings hand out their outputs, then one copies)
    assert [r.direct for r in runner.live] == [True, True, False] and runner.recordings <= 4


@cuda
@torch.no_grad()
def test_results_are_the_graphs_outputs_while_no_one_holds_the_last_ones():
    """A loop that drops its results replays one recording and copies nothing; `y = f(x)` in a
    loop (the old y alive during the call) alternates between two; a held view, a kept result
    and a result resized by the caller are never overwritten."""
    model = _mlp("cuda")
    compiled = ember.compile(model, mode="reduce-overhead")
    x = torch.randn(1, 64, device="cuda")
    with _spied_runners() as runners:
        compiled(x), compiled(x)
    runner = runners[0]
    expected = model(x)
    for _ in range(5):
        compiled(x)
    assert [r.direct for r in runner.live] == [True] and runner.recordings == 1
    y = None
    for step in range(6):
        y = compiled(x + step)
        torch.testing.assert_close(y, model(x + step))
    assert [r.direct for r in runner.live] == [True, True]
    view = compiled(x)[0, :8]  # (only a view of the result survives)
    kept = compiled(x * 2)
    for step in range(4):
        compiled(x + step)
    torch.testing.assert_close(view, expected[0, :8])
    torch.testing.assert_close(kept, model(x * 2))
    del view, kept, y
    resized = compiled(x)
    resized.resize_(4096)  # (moves the storage: that recording must never replay into it again)
    resized.fill_(7.0)
    for step in range(3):
        torch.testing.assert_close(compiled(x + step), model(x + step))
    assert bool((resized == 7.0).all())


@cuda
def test_graphs_that_cannot_replay_run_as_they_are():
    """A graph drawing random numbers keeps its wrapper (a replay would repeat the numbers)."""
    fn = ember.compile(lambda x: torch.nn.functional.dropout(x, 0.5, training=True) + 1, mode="reduce-overhead")
    x = torch.ones(1000, device="cuda")
    first, second = fn(x), fn(x)
    assert not torch.equal(first, second)


def test_direct_results_are_free_only_when_no_one_holds_them():
    """The use-count check behind handing out a graph's outputs (CPU tensors stand in)."""
    from ember.runtime.cudagraphs import _direct_protocol

    outputs = (torch.randn(4, 4), 3, torch.randn(2))
    free, results = _direct_protocol(outputs)
    assert free()
    first = results()
    assert isinstance(first, tuple) and first[1] == 3 and first[0] is not outputs[0]
    assert first[0].data_ptr() == outputs[0].data_ptr() and not free()
    only_view = first[2][1:]
    del first
    assert not free()  # (a view holds the storage)
    del only_view
    assert free()
    taken = results()[0]
    taken.resize_(1000)  # (a new storage allocation: the recording's memory moved)
    del taken
    assert not free()


def test_the_replay_check_compares_metadata_and_the_addresses_not_copied_in():
    """The per-call check a recording writes out (CPU tensors stand in: it only reads metadata)."""
    from ember.runtime.cudagraphs import _input_check, _meta

    weight, batch = torch.randn(4, 4), torch.randn(2, 4)
    check = _input_check([_meta(weight), _meta(batch), _meta(3)], copied={1})
    assert check([weight, torch.randn(2, 4), 3])  # (input 1 is copied in: any address)
    assert not check([weight.clone(), batch, 3])  # (input 0 moved)
    assert not check([weight, torch.randn(3, 4), 3])
    assert not check([weight, torch.randn(4, 2).t(), 3])
    assert not check([weight, batch.double(), 3])
    assert not check([weight, batch, 4])
    assert not check([weight, batch, 3.0])
    assert not check([weight, batch])
    static = _input_check([_meta(weight), _meta(batch), _meta(3)], copied={1}, static=True)
    assert static([weight, torch.randn(2, 4), 3])
    assert not static([weight.clone(), batch, 3])  # (a graph without symbolic sizes: addresses only)
    assert not static([weight, batch, 4])


@cuda
@pytest.mark.parametrize("set_to_none", [True, False])
def test_training_steps_match_eager(set_to_none):
    """Forward and backward graphs replayed as CUDA graphs while autograd holds the forward's
    saved tensors and `.grad` holds (or accumulates into) the backward's results: five SGD
    steps give eager's parameters (with zero_grad(set_to_none=False) the gradients are added
    in place into the first step's results)."""
    torch.manual_seed(0)
    model = _mlp("cuda")
    reference = _mlp("cuda")
    reference.load_state_dict(model.state_dict())
    compiled = ember.compile(model, mode="reduce-overhead")
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, reference)]
    for step in range(5):
        x = torch.randn(4, 64, device="cuda")
        for function, optimizer in zip((compiled, reference), optimizers):
            optimizer.zero_grad(set_to_none=set_to_none)
            loss = function(x).square().mean()
            loss.backward()
            optimizer.step()
    for ours, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(ours, theirs)
        torch.testing.assert_close(ours.grad, theirs.grad)
