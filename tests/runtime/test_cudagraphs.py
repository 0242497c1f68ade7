"""mode="reduce-overhead": compiled GPU graphs replayed as CUDA graphs (ember/runtime/cudagraphs.py)."""
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


@cuda
def test_replays_match_eager_with_fresh_inputs_and_outputs_survive_the_next_call():
    from ember.runtime.cudagraphs import CudaGraphRunner

    model = _mlp("cuda")
    compiled = ember.compile(model, mode="reduce-overhead")
    runners = []
    original = CudaGraphRunner.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        runners.append(self)

    CudaGraphRunner.__init__ = spy
    try:
        with torch.no_grad():
            results = []
            for step in range(6):
                x = torch.randn(1, 64, device="cuda")  # (a new address every call: copied in)
                results.append((compiled(x), model(x)))
            for got, expected in results:  # (earlier outputs are not overwritten by later replays)
                torch.testing.assert_close(got, expected)
    finally:
        CudaGraphRunner.__init__ = original
    assert runners and runners[0].graph is not None and runners[0].disabled is None
    assert runners[0].recordings <= 2 and 0 in runners[0].copied


@cuda
def test_graphs_that_cannot_replay_run_as_they_are():
    """A graph drawing random numbers keeps its wrapper (a replay would repeat the numbers)."""
    fn = ember.compile(lambda x: torch.nn.functional.dropout(x, 0.5, training=True) + 1, mode="reduce-overhead")
    x = torch.ones(1000, device="cuda")
    first, second = fn(x), fn(x)
    assert not torch.equal(first, second)


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
