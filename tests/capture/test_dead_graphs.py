"""A frame whose recorded operations are all dead still gives the backend one graph, as
torch.compile does (it compiles the frame and counts it); a frame that recorded nothing gives none."""
import torch

import ember
from capture_helpers import assert_matches_eager


def _dropped_result(x):
    y = x + 1  # computed, never used
    return torch.is_floating_point(y)


def _dropped_in_a_container(x):
    return not [x + 1]


def _nothing_recorded(x):
    return x.dim() + 1


def test_a_frame_of_dead_ops_compiles_one_graph():
    assert_matches_eager(_dropped_result, torch.randn(3), graphs=1)
    assert_matches_eager(_dropped_in_a_container, torch.randn(3), graphs=1)


def test_the_backend_is_called_once_for_a_frame_of_dead_ops():
    calls = []

    def backend(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    ember.reset()
    compiled = ember.compile(_dropped_result, backend=backend, fullgraph=True)
    assert compiled(torch.randn(3)) is True
    assert compiled(torch.randn(3)) is True
    assert len(calls) == 1


def test_a_frame_that_records_nothing_compiles_no_graph():
    assert_matches_eager(_nothing_recorded, torch.randn(3), graphs=0)
