"""Tensor methods that return the tensor itself when nothing changes (float() of a float tensor,
contiguous() of a contiguous one, to() its own dtype, type() its own class) give that same
object under capture: `is` answers as in eager."""
import torch

from capture_helpers import assert_matches_eager


def test_methods_returning_self_keep_identity():
    def f(a, b):
        return (a.float() is a, a.contiguous() is a, a.to(torch.float32) is a, a.type(torch.FloatTensor) is a,
                a.double() is a, b.t().contiguous() is b, a.float() + 1)

    assert_matches_eager(f, torch.randn(3), torch.randn(2, 3), graphs=1)
