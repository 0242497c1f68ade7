"""index_put and scatter through ember's C++ kernels, against eager (duplicates included)."""
import torch

from codegen_helpers import run

aten = torch.ops.aten


def no_fallback(graphs, name):
    assert not any(name in op for graph in graphs for op in graph.fallbacks), [g.fallbacks for g in graphs]


def test_index_put_accumulate_with_duplicates():
    x, values = torch.randn(6, 5), torch.randn(4, 5)
    index = torch.tensor([1, 3, 1, -1])
    fn = lambda x, v, i: aten.index_put.default(x * 2, [i], v, True)  # noqa: E731
    (out, graphs) = run(fn, x, values, index)
    torch.testing.assert_close(out, fn(x, values, index))
    no_fallback(graphs, "index_put")


def test_index_put_assign_and_middle_dim():
    x, values = torch.randn(3, 6, 4), torch.randn(3, 2, 4)
    index = torch.tensor([4, 0])
    fn = lambda x, v, i: aten.index_put.default(x, [None, i], v + 1, False)  # noqa: E731
    out, graphs = run(fn, x, values, index)
    torch.testing.assert_close(out, fn(x, values, index))
    no_fallback(graphs, "index_put")


def test_scatter_add_and_scatter_src_value():
    x, src = torch.randn(4, 7), torch.randn(4, 3)
    index = torch.tensor([[0, 0, 6], [1, 2, 3], [5, 5, 5], [6, 0, 1]])
    for fn in (lambda x, s, i: x.scatter_add(1, i, s), lambda x, s, i: x.scatter_add(0, i[:, :2] % 4, s[:, :2]),
               lambda x, s, i: x.scatter(1, i[:, :1], s[:, :1]), lambda x, s, i: x.scatter(1, i[:, :1], 2.5)):
        out, graphs = run(fn, x, src, index)
        torch.testing.assert_close(out, fn(x, src, index))
        no_fallback(graphs, "scatter")


def test_embedding_backward_is_a_kernel():
    weight = torch.randn(10, 8, requires_grad=True)
    ids = torch.tensor([[1, 2, 1], [9, 1, 0]])
    fn = lambda w, i: torch.nn.functional.embedding(i, w).sin().sum()  # noqa: E731
    out, graphs = run(fn, weight, ids)
    (ours,) = torch.autograd.grad(out, weight)
    (theirs,) = torch.autograd.grad(fn(weight, ids), weight)
    torch.testing.assert_close(ours, theirs)
    no_fallback(graphs, "index_put")
    assert any("+=" in source for graph in graphs for source in graph.kernels.values())
