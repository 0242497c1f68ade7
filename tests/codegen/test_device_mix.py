"""CPU tensors meeting GPU tensors in one graph (ember/codegen/compile.py
`_copy_cpu_scalars_to_device`): eager lets a CPU tensor of no dims take part in a GPU op, nothing
else.  The pass runs on fake CUDA values, so CI checks it without a GPU."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import ember
from ember.codegen.compile import _copy_cpu_scalars_to_device, _device_types

aten = torch.ops.aten


def _graph():
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        x = torch.empty(3, device="cuda")
        s = torch.empty(())
        i = torch.zeros(1, dtype=torch.int64)
        t = torch.empty(4)
    g = torch.fx.Graph()
    nodes = {}
    for name, value in (("x", x), ("s", s), ("i", i), ("t", t)):
        nodes[name] = g.placeholder(name)
        nodes[name].meta["val"] = value

    def call(target, *args):
        node = g.call_function(target, args)
        with mode:
            node.meta["val"] = target(*[a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args])
        return node

    on_gpu = call(aten.mul.Tensor, nodes["x"], nodes["s"])  # a CPU scalar in a GPU op
    on_cpu = call(aten.mul.Tensor, nodes["t"], nodes["s"])  # the same scalar in a CPU op
    g.output((on_gpu, on_cpu, nodes["s"], nodes["i"]))
    return torch.fx.GraphModule(torch.nn.Module(), g), on_gpu, on_cpu, nodes


def test_a_cpu_scalar_is_copied_for_its_gpu_users_only():
    gm, on_gpu, on_cpu, nodes = _graph()
    _copy_cpu_scalars_to_device(gm)
    copy = on_gpu.args[1]
    assert copy.target is aten._to_copy.default and copy.args[0] is nodes["s"]
    assert copy.kwargs["device"] == torch.device("cuda", 0) or copy.kwargs["device"].type == "cuda"
    assert on_cpu.args[1] is nodes["s"]  # the CPU op still reads the CPU tensor
    (output,) = [n for n in gm.graph.nodes if n.op == "output"]
    assert output.args[0][2] is nodes["s"]  # returned as the CPU tensor it is
    assert _device_types(gm) == {"cpu", "cuda"}  # (the CPU op: the graph runs as ATen calls)


def test_a_one_element_tensor_with_dims_is_not_a_scalar():
    """`torch.tensor([0])` is no CPU scalar to eager: index_select with a CUDA input refuses it
    (fuzz 20122); indexing a CPU tensor with a CUDA copy of it raised (20461)."""
    gm, _, _, nodes = _graph()
    _copy_cpu_scalars_to_device(gm)
    assert all(user.op == "output" for user in nodes["i"].users)
    assert not any(n.target is aten._to_copy.default and n.args[0] is nodes["i"] for n in gm.graph.nodes)


def test_eager_accepts_follows_eagers_device_rule():
    """The op's device check, not only its dtypes: index_select takes no CPU index with a CUDA
    input (its decomposition, `index`, would), a product no CPU tensor with dims."""
    from ember.eager.check import eager_accepts

    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(3, 2, device="cuda")
        i = torch.zeros(1, dtype=torch.int64)
        s = torch.empty(())
    assert not eager_accepts(aten.index_select.default, (x, 0, i), {})
    assert not eager_accepts(aten.mul.Tensor, (x, i), {})
    assert eager_accepts(aten.mul.Tensor, (torch.empty(3), s), {})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cpu_index_tensors_with_gpu_inputs_behave_as_in_eager():
    def select(x):
        return x.relu().index_select(0, torch.tensor([0]))

    def index_cpu(x):
        v = torch.arange(8)
        return v[[-3]], x * 2

    x = torch.randn(3, 2, device="cuda")
    with pytest.raises(RuntimeError, match="same device"):
        select(x)
    with pytest.raises(RuntimeError, match="same device"):
        ember.compile(select, backend="ember")(x)
    for expected, got in zip(index_cpu(x), ember.compile(index_cpu, backend="ember")(x)):
        assert expected.device == got.device
        torch.testing.assert_close(got, expected)
