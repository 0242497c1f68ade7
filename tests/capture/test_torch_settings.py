"""torch.backends.cuda.matmul's settings (read through cuBLASModule.__getattr__) are answered at
capture time and guarded: switching one between calls captures again."""
import pytest
import torch

import ember
from capture_helpers import assert_matches_eager


def _branch_on_tf32(x):
    if torch.backends.cuda.matmul.allow_tf32:
        return x.sin() + 1
    return x.cos() - 1


def test_cublas_setting_read_in_the_graph():
    assert_matches_eager(_branch_on_tf32, torch.randn(4), graphs=1)


def test_switching_the_cublas_setting_captures_again():
    before = torch.backends.cuda.matmul.allow_tf32
    ember.reset()
    compiled = ember.compile(_branch_on_tf32, backend="eager")
    x = torch.randn(4)
    try:
        for setting in (False, True, False):
            torch.backends.cuda.matmul.allow_tf32 = setting
            torch.testing.assert_close(compiled(x), _branch_on_tf32(x))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_unknown_cublas_setting_raises_as_in_eager():
    def f(x):
        return x + 1, hasattr(torch.backends.cuda.matmul, "no_such_setting")

    assert_matches_eager(f, torch.randn(2), graphs=1)

    def g(x):
        return torch.backends.cuda.matmul.no_such_setting

    with pytest.raises(AttributeError, match="no_such_setting"):
        ember.compile(g, backend="eager")(torch.randn(2))
