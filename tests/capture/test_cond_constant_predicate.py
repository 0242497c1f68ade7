"""torch.cond with a Python-constant predicate inlines the branch eager would call; a tensor
predicate is captured too (both branches as subgraphs: test_cond_tensor_predicate.py)."""
import torch

import ember
from capture_helpers import assert_matches_eager


def _true_branch(x, y):
    return x.sin() + y


def _false_branch(x, y):
    return x.cos() - y


def test_cond_with_a_shape_predicate_inlines_the_chosen_branch():
    def f(x, y):
        first = torch.cond(x.shape[0] > 2, _true_branch, _false_branch, (x, y))
        second = torch.cond(pred=x.dim() > 3, true_fn=_true_branch, false_fn=_false_branch, operands=[x, y])
        return first, second, torch.cond(0.0, lambda: x * 2, lambda: x * 3)

    assert_matches_eager(f, torch.randn(4), torch.randn(4), graphs=1)
    assert_matches_eager(f, torch.randn(2), torch.randn(2), graphs=1)


def test_cond_with_a_tensor_predicate_is_captured_in_the_same_graph():
    def f(x):
        return torch.cond(x.sum() > 0, lambda t: t + 1, lambda t: t - 1, (x,)) * 2

    assert_matches_eager(f, torch.ones(3), graphs=1, breaks=0)
    assert_matches_eager(f, -torch.ones(3), graphs=1, breaks=0)


def test_cond_with_a_dynamic_size_predicate_is_decided_and_guarded():
    def f(x):
        return torch.cond(x.shape[0] > 4, lambda t: t + 1, lambda t: t - 1, [x])

    ember.reset()
    compiled = ember.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)
    for size in (6, 3, 8, 2):
        x = torch.randn(size)
        torch.testing.assert_close(compiled(x), f(x))
    ember.reset()
