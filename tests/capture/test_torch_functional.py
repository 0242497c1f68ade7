"""Functions defined in torch/functional.py (einsum, split, norm, ...) are graph nodes, as in
torch.compile: no graph break, even under fullgraph."""
import torch

from capture_helpers import assert_matches_eager


def _functional(x, y):
    a, b = torch.split(x, 2)
    c, d = torch.broadcast_tensors(a, b[0])
    chunks = torch.functional.split(y, [1, 2], dim=1)
    return (torch.einsum("ij,jk->ik", a, y), torch.norm(b), torch.tensordot(a, y, 1), c + d,
            torch.cdist(a, b), chunks[1], torch.block_diag(a, b), torch.linalg.multi_dot([a.T, a, y]),
            torch.meshgrid(x[0], y[0], indexing="ij")[1])


def test_torch_functional_functions_are_captured_in_one_graph():
    assert_matches_eager(_functional, torch.randn(4, 3), torch.randn(3, 3), graphs=1, breaks=0)
