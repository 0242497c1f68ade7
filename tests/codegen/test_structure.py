"""Structure of generated code: what fuses into one kernel (seed 003 and the classic patterns)."""
import torch

from codegen_helpers import run
from ember.codegen.compile import CompiledGraph, compile_graph


def compiled_graphs(fn, *args):
    with torch.no_grad():
        return run(fn, *args)


def extern_lines(graph: CompiledGraph) -> list[str]:
    return [line for line in graph.wrapper.splitlines()
            if "aten" in line and "=" in line and "kernel" not in line and "ensure_layout(" not in line
            and not line.strip().startswith("#")]


def test_seed003_sin_cos_is_one_kernel_writing_both_outputs():
    x = torch.randn(64, 128)
    (y, z), graphs = compiled_graphs(lambda x: (x.sin(), x.sin().cos()), x)
    torch.testing.assert_close(y, x.sin())
    torch.testing.assert_close(z, x.sin().cos())
    (graph,) = graphs
    assert len(graph.kernels) == 1
    (source,) = graph.kernels.values()
    assert source.count("std::sin(") == 1 and source.count("std::cos(") == 1
    assert "out_ptr0[" in source and "out_ptr1[" in source


def test_softmax_over_last_dim_is_one_kernel():
    x = torch.randn(32, 100)
    out, graphs = compiled_graphs(lambda x: torch.softmax(x, -1), x)
    torch.testing.assert_close(out, torch.softmax(x, -1))
    assert len(graphs[0].kernels) == 1 and not extern_lines(graphs[0])


def test_layer_norm_forward_is_one_kernel():
    x, w, b = torch.randn(16, 64), torch.randn(64), torch.randn(64)
    out, graphs = compiled_graphs(lambda x, w, b: torch.nn.functional.layer_norm(x, (64,), w, b), x, w, b)
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, (64,), w, b), rtol=1e-5, atol=1e-5)
    assert len(graphs[0].kernels) == 1 and not extern_lines(graphs[0])


def test_chain_of_ten_pointwise_ops_is_one_kernel():
    def chain(x):
        for step in range(10):
            x = (x * 1.01 + 0.1).tanh() if step % 2 else x.sigmoid() - 0.5
        return x

    x = torch.randn(128, 33)
    out, graphs = compiled_graphs(chain, x)
    torch.testing.assert_close(out, chain(x))
    assert len(graphs[0].kernels) == 1


def test_matmul_bias_gelu_is_one_extern_call_and_one_kernel():
    x, w, b = torch.randn(8, 32), torch.randn(32, 16), torch.randn(16)
    fn = lambda x, w, b: torch.nn.functional.gelu(x @ w + b)  # noqa: E731
    out, graphs = compiled_graphs(fn, x, w, b)
    torch.testing.assert_close(out, fn(x, w, b), rtol=1e-5, atol=1e-5)
    graph = graphs[0]
    assert len(graph.kernels) == 1
    externs = extern_lines(graph)
    assert len(externs) == 1 and "mm" in externs[0]


def test_outputs_keep_eager_strides_and_backward_reads_them_right():
    x = torch.randn(6, 4, requires_grad=True)

    def fn(x):
        y = x.t() * 2  # eager keeps x.t()'s memory order: strides (1, 6)
        return y, (y.sin() * y).sum()

    (y, loss), _ = run(fn, x)
    expected_y, expected_loss = fn(x)
    assert y.stride() == expected_y.stride()
    torch.testing.assert_close(y, expected_y)
    (grad,) = torch.autograd.grad(loss, x)
    (expected_grad,) = torch.autograd.grad(expected_loss, x)
    torch.testing.assert_close(grad, expected_grad)


def test_every_stage_dumps_with_aten_node_and_user_line():
    def fn(x):
        y = x.sin()
        return y.cos()  # sin is inlined into cos's loop: every dump names this line

    import ember
    from ember.autograd.api import aot_backend

    graphs = []

    def compiler(gm, example_inputs):
        graph = compile_graph(gm, example_inputs)
        graphs.append(graph)
        return graph

    with torch.no_grad():
        ember.compile(fn, backend=aot_backend(compiler))(torch.randn(8, 8))
    (graph,) = graphs
    for text in (graph.ir(), graph.schedule(), graph.wrapper, *graph.kernels.values()):
        assert "aten.sin.default" in text or "aten.cos.default" in text, text
        assert "test_structure.py:" in text and "return y.cos()" in text, text
    assert "def inner_fn(i0, i1):" in graph.ir() and "ops.sin(" in graph.ir()


def test_cross_entropy_gradient_is_not_stored_as_a_one_hot_tensor():
    """nll_loss's gradient (zeros with -1/n at each target) reads only the targets and two
    scalars: each reader recomputes it rather than storing a tensor of the logits' size (GPT-2's
    vocabulary made that 1.6 GB written and read twice per step)."""
    logits = torch.randn(64, 1000, requires_grad=True)
    target = torch.randint(0, 1000, (64,))
    (loss), graphs = run(lambda x, t: torch.nn.functional.cross_entropy(x.sin(), t), logits, target)
    loss.backward()
    expected = logits.detach().clone().requires_grad_()
    torch.nn.functional.cross_entropy(expected.sin(), target).backward()
    torch.testing.assert_close(logits.grad, expected.grad)
    backward = graphs[-1]
    full_size = [line for line in backward.wrapper.splitlines() if "empty_strided" in line and "(64, 1000)" in line]
    assert len(full_size) == 1, backward.wrapper  # the gradient itself, nothing else of its size


def test_pointwise_nodes_over_the_same_elements_in_other_dims_share_a_kernel():
    """A stored bias add over the product's [20, 32] and the GELU that reads it as [4, 5, 32]
    (a training forward saves the add for GELU's backward): one kernel over their common
    refinement [4, 5, 32], writing both (they were two, the second reading the first back)."""
    def f(a, w, b):
        h = torch.mm(a.reshape(20, 16), w) + b
        return h, torch.nn.functional.gelu(h.view(4, 5, 32))

    a, w, b = torch.randn(4, 5, 16), torch.randn(16, 32), torch.randn(32)
    (h, g), graphs = compiled_graphs(f, a, w, b)
    expected_h, expected_g = f(a, w, b)
    torch.testing.assert_close(h, expected_h)
    torch.testing.assert_close(g, expected_g)
    assert len(graphs[0].kernels) == 1
    (source,) = graphs[0].kernels.values()
    assert "out_ptr0[" in source and "out_ptr1[" in source


def test_common_refinement_of_ranges():
    from ember.scheduling.scheduler import common_refinement

    assert common_refinement([12608, 3072], [64, 197, 3072]) == [64, 197, 3072]
    assert common_refinement([6, 35], [2, 3, 5, 7]) == [2, 3, 5, 7]
    assert common_refinement([6, 4], [4, 6]) is None  # (would split a run on both sides)
    assert common_refinement([8], [2, 3]) is None
    assert common_refinement([2, 3, 4], [6, 4]) == [2, 3, 4]


def test_extern_calls_use_torch_bindings_only_where_they_mean_that_overload():
    """The wrapper calls torch.convolution rather than torch.ops.aten.convolution.default (7-12 us
    less host time a call on the H100 machine) where no other overload could take the call."""
    from ember.codegen.wrapper import _binding

    aten, functions = torch.ops.aten, torch._C._VariableFunctions
    assert _binding(aten.convolution.default, {}) is functions.convolution
    assert _binding(aten.mm.default, {}) is functions.mm  # (mm.dtype needs an out_dtype more)
    assert _binding(aten.addmm.default, {"beta": 2}) is functions.addmm
    assert _binding(aten.add.Tensor, {}) is aten.add.Tensor  # (add.Scalar takes the same arguments)
    assert _binding(aten.add_.Tensor, {}) is aten.add_.Tensor  # (in place)
    assert _binding(aten.mm.default, {"mat2": None}) is aten.mm.default  # (by name: bindings rename self)
    a, b, c = torch.randn(3, 4), torch.randn(4, 5), torch.randn(5)
    out, graphs = compiled_graphs(lambda a, b, c: torch.addmm(c, a, b, beta=0.5), a, b, c)
    torch.testing.assert_close(out, torch.addmm(c, a, b, beta=0.5))


def test_a_bias_add_stored_anyway_goes_back_into_the_product(monkeypatch):
    """mm + bias read only by another product (attention's q/k/v, through views) is one addmm
    call (cuBLASLt's bias epilogue on a GPU); a bias that a pointwise op comes after stays in that
    op's kernel."""
    from ember.lowering import bias_epilogue

    monkeypatch.setattr(bias_epilogue, "DEVICES", {"cpu", "cuda"})
    a, w, b, w2 = torch.randn(6, 8), torch.randn(8, 4), torch.randn(4), torch.randn(2, 3)

    def projected(a, w, b, w2):
        h = (a @ w + b).view(6, 2, 2)
        return torch.bmm(h, w2.expand(6, 2, 3))

    out, graphs = compiled_graphs(projected, a, w, b, w2)
    torch.testing.assert_close(out, projected(a, w, b, w2))
    assert "addmm" in graphs[0].wrapper and not graphs[0].kernels

    out, graphs = compiled_graphs(lambda a, w, b: torch.nn.functional.gelu(a @ w + b), a, w, b)
    torch.testing.assert_close(out, torch.nn.functional.gelu(a @ w + b))
    assert "addmm" not in graphs[0].wrapper and len(graphs[0].kernels) == 1

    def saved(a, w, b):  # (a training forward saving the sum for GELU's backward: stored anyway)
        h = a @ w + b
        return h, torch.nn.functional.gelu(h)

    (h, out), graphs = compiled_graphs(saved, a, w, b)
    torch.testing.assert_close(out, torch.nn.functional.gelu(a @ w + b))
    assert "addmm" in graphs[0].wrapper and len(graphs[0].kernels) == 1


def test_every_kernel_backend_is_a_kernel_backend():
    """The graph steps and the wrapper call the backends through one protocol (no getattr probes)."""
    from ember.codegen.devices import BACKENDS, KernelBackend

    for name, backend in BACKENDS.items():
        assert isinstance(backend, KernelBackend), name
        assert backend.name == name and isinstance(backend.background_builds, bool)
