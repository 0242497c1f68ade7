"""Division by a CPU scalar on a GPU (ember/lowering/division.py): eager's CUDA kernels multiply
by the scalar's reciprocal, and so do ember's.  The lowering is checked on fake CUDA values (CI
has no GPU); the values on a GPU."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ember.codegen.compile import LOWER, GraphWork, _copy_cpu_scalars_to_device
from ember.lowering.printer import ir_text

aten = torch.ops.aten


def _lowered(target, dtype, divisor, **kwargs):
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        x = torch.empty(8, device="cuda", dtype=dtype)
        s = torch.empty((), dtype=torch.float64)
    g = torch.fx.Graph()
    node_x = g.placeholder("x")
    node_x.meta["val"] = x
    node_s = g.placeholder("s")
    node_s.meta["val"] = s
    other = node_s if divisor == "cpu_scalar" else divisor
    node = g.call_function(target, (node_x, other), kwargs)
    with mode:
        node.meta["val"] = target(x, s if divisor == "cpu_scalar" else divisor, **kwargs)
    g.output((node,))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    _copy_cpu_scalars_to_device(gm)
    work = GraphWork(gm=gm, example_inputs=[x, s])
    LOWER.run(work)
    return ir_text(work.lowering)


def test_true_division_by_a_number_multiplies_by_its_float64_reciprocal_rounded():
    """(torch 2.11 on an H200: -2220 / 0.001 is -2220000 there, -2220 * fl32(1 / fl32(0.001)) would
    be -2219999.75; x / 7 is x * fl32(1 / 7) at every element)"""
    text = _lowered(aten.div.Tensor, torch.float32, 7.0)
    inverse = float(torch.tensor(1.0 / 7.0).float())
    assert f"ops.mul(tmp0, ops.constant({inverse!r}, float32))" in text and "truediv" not in text, text
    assert "ops.constant(1000.0, float32)" in _lowered(aten.div.Tensor, torch.float32, 0.001)


def test_truncating_division_by_a_number_truncates_the_product_with_its_float32_reciprocal():
    text = _lowered(aten.div.Tensor_mode, torch.float32, 0.001, rounding_mode="trunc")
    inverse = float(torch.tensor(1.0) / torch.tensor(0.001))  # 999.9999389648438, not 1000
    assert f"ops.mul(tmp0, ops.constant({inverse!r}, float32))" in text and "ops.trunc(" in text, text
    assert "truncdiv" not in text


def test_a_half_division_takes_the_reciprocal_of_the_unrounded_divisor():
    # (not of 0.1 rounded to float16, 0.0999755859375: 3332 of 12000 elements apart on an H200)
    text = _lowered(aten.div.Tensor_mode, torch.float16, 0.1, rounding_mode="trunc")
    inverse = float(torch.tensor(1.0) / torch.tensor(0.1))
    assert f"ops.constant({inverse!r}, float32)" in text, text


def test_float64_takes_the_reciprocal_in_float64():
    text = _lowered(aten.div.Tensor_mode, torch.float64, 3.0, rounding_mode="trunc")
    assert f"ops.constant({1.0 / 3.0!r}, float64)" in text, text


def test_a_cpu_scalar_tensor_is_inverted_in_the_kernel():
    text = _lowered(aten.div.Tensor_mode, torch.float32, "cpu_scalar", rounding_mode="trunc")
    assert "ops.reciprocal(" in text and "ops.mul(" in text and "truncdiv" not in text, text


def test_a_tensor_divisor_on_the_device_divides():
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        x = torch.empty(8, device="cuda")
        y = torch.empty(8, device="cuda")
    g = torch.fx.Graph()
    nodes = []
    for name, value in (("x", x), ("y", y)):
        nodes.append(g.placeholder(name))
        nodes[-1].meta["val"] = value
    node = g.call_function(aten.div.Tensor, tuple(nodes))
    with mode:
        node.meta["val"] = aten.div.Tensor(x, y)
    g.output((node,))
    work = GraphWork(gm=torch.fx.GraphModule(torch.nn.Module(), g))
    LOWER.run(work)
    assert "ops.truediv(" in ir_text(work.lowering)


def _where_product_and_quotient_differ(divisor, rounding):
    """float32 values whose product with fl(1/divisor) rounds (or truncates) otherwise than their
    quotient: found on the CPU (IEEE float32 either way)."""
    a = torch.arange(-6000, 6000, dtype=torch.float32) * 0.37
    inverse = torch.tensor(1.0) / torch.tensor(divisor)
    product, quotient = a * inverse, a / divisor
    if rounding == "trunc":
        product, quotient = product.trunc(), quotient.trunc()
    return a[product != quotient]


def test_the_values_that_tell_them_apart_exist():
    assert len(_where_product_and_quotient_differ(0.001, None)) > 0
    assert len(_where_product_and_quotient_differ(0.001, "trunc")) > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("rounding", [None, "trunc"])
@pytest.mark.parametrize("divisor", [0.001, 0.3, 7.0, 0.007])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_ember_divides_by_a_number_as_eagers_cuda_kernel(rounding, divisor, dtype):
    """fuzz conv 704734: log_softmax of div(e, 1e-3, rounding_mode='trunc') on an H200."""
    import ember

    a = (torch.arange(-6000, 6000, dtype=torch.float32) * 0.37).to(dtype).cuda()

    def f(x):
        return torch.div(x, divisor, rounding_mode=rounding) + 0.0

    expected = f(a)
    got = ember.compile(f, backend="ember")(a)
    assert torch.equal(got, expected), (got != expected).sum()
