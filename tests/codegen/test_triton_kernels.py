"""Triton kernels from ember's IR and schedule: structure (how many kernels, what they hold) and
results against eager.  Without a GPU, Triton's interpreter runs them on CPU tensors
(`cpu_kernels="triton"`; tests/conftest.py sets TRITON_INTERPRET before anything imports
triton); with one, they compile and run on it."""
import copy
import re

import pytest
import torch
import torch.nn.functional as F

import ember
from tests.codegen.codegen_helpers import ember_compiled

triton = pytest.importorskip("triton")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(autouse=True)
def _triton_kernels_on_cpu():
    with ember.config.patch(cpu_kernels="triton"):
        yield


def _run(fn, *args, backward: bool = False, tolerance=None):
    """fn compiled with Triton kernels, compared with eager (and its gradients, with
    `backward`); returns the CompiledGraphs (forward, then backward)."""
    args = [a.to(DEVICE) for a in args]
    function, graphs = ember_compiled(fn)
    tolerance = tolerance or {}
    if backward:
        ours = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
        theirs = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
        out, expected = function(*ours), fn(*theirs)
        grad = torch.randn_like(expected)
        out.backward(grad)
        expected.backward(grad)
        torch.testing.assert_close(out, expected, **tolerance)
        for a, b in zip(ours, theirs):
            if b.grad is not None:
                torch.testing.assert_close(a.grad, b.grad, **tolerance)
    else:
        out, expected = function(*args), fn(*args)
        torch.testing.assert_close(out, expected, equal_nan=True, **tolerance)
    for graph in graphs:
        assert not graph.fallbacks or set(graph.fallbacks) <= {"aten.mm.default", "aten.addmm.default"}, graph.fallbacks
    return graphs


def _kernels(graph) -> list[str]:
    """The Triton kernels of a compiled graph (one scheduled kernel may hold several)."""
    return [text for source in graph.kernels.values() for text in source.split("@triton.jit")[1:]]


def test_seed_toy_is_one_kernel_with_two_stores():
    """Seed 003's toy, sin then cos: one Triton kernel storing both results, as in the talk."""
    def toy(x):
        a = torch.sin(x)
        return a, torch.cos(a)

    x = torch.randn(37, 5)
    function, graphs = ember_compiled(toy)
    a, b = function(x.to(DEVICE))
    torch.testing.assert_close(a.cpu(), x.sin())
    torch.testing.assert_close(b.cpu(), x.sin().cos())
    (kernel,) = _kernels(graphs[0])
    assert kernel.count("tl.store(") == 2 and "xmask" in kernel
    assert "kernel0_" in graphs[0].wrapper and "xnumel" not in graphs[0].wrapper  # sizes passed as numbers


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pointwise_chain_with_broadcast_and_transposed_input(dtype):
    """A broadcast bias, a transposed input, NaN-propagating maximum, where: loads at layout
    indices, half types computed in float32 and rounded when stored."""
    def fn(x, bias):
        y = torch.maximum(x.t() * 2 + bias, torch.zeros((), dtype=x.dtype, device=x.device))
        return torch.where(y > 1, y.sigmoid(), y - 1)

    x = torch.randn(7, 9).to(dtype)
    x[0, 0] = float("nan")
    bias = torch.randn(7).to(dtype)
    # (bfloat16: one rounding apart where a float32 sigmoid lands on a rounding boundary)
    tolerance = {"atol": 8e-3, "rtol": 1.6e-2} if dtype == torch.bfloat16 else None
    (graph,) = _run(fn, x, bias, tolerance=tolerance)
    assert len(_kernels(graph)) == 1


@pytest.mark.parametrize("columns", [300, 5000])
def test_softmax_is_one_kernel(columns):
    """Max, sum of exponentials and the division in one kernel: persistent (the row in one
    block) for short rows, looped (accumulators over blocks of the row) for long ones."""
    (graph,) = _run(lambda x: torch.softmax(x, -1), torch.randn(6, columns))
    (kernel,) = _kernels(graph)
    assert kernel.count("tl.store(") >= 1
    assert ("for roffset in range" in kernel) == (columns > 2048)


def test_layer_norm_forward_and_backward():
    """layer_norm's forward is one kernel; its backward is one kernel for the input's gradient
    (row reductions, then the pointwise formula) and one for weight and bias (column sums)."""
    graphs = _run(lambda x, w, b: F.layer_norm(x, (64,), w, b), torch.randn(32, 64), torch.randn(64),
                  torch.randn(64), backward=True, tolerance={"atol": 1e-4, "rtol": 1e-4})
    forward, backward = graphs
    assert len(_kernels(forward)) == 1
    assert len(_kernels(backward)) <= 2


@pytest.mark.parametrize("rows", [64, 2560], ids=["persistent", "looped"])
def test_statistics_only_the_kernel_reads_are_never_stored(rows):
    """A layer norm at inference: its mean and variance are read only by the normalizing
    epilogue of their own kernel, so they stay in registers: the wrapper allocates the output
    alone (each buffer is a Python allocation per call)."""
    (graph,) = _run(lambda x, w, b: F.layer_norm(x, (rows,), w, b), torch.randn(256, rows), torch.randn(rows),
                    torch.randn(rows), tolerance={"atol": 1e-4, "rtol": 1e-4})
    (kernel,) = _kernels(graph)
    assert graph.wrapper.count("empty_strided(") == 1, graph.wrapper
    assert kernel.count("tl.store(") == 1, kernel


def test_bias_gelu_after_matmul_is_one_kernel():
    """The matmul is an extern call; the bias and the exact GELU after it, one kernel."""
    (graph,) = _run(lambda x, w, b: F.gelu(x @ w + b), torch.randn(32, 64), torch.randn(64, 48), torch.randn(48),
                    tolerance={"atol": 1e-4, "rtol": 1e-4})
    (kernel,) = _kernels(graph)
    assert "erf(" in kernel  # (tl.erf under the interpreter, libdevice.erf on a GPU)


@pytest.mark.parametrize("name, fn", [
    ("sum_all", lambda x: x.sum()),
    ("amax_dim0", lambda x: x.amax(0)),
    ("argmax", lambda x: x.argmax(-1)),
    ("argmin_long", lambda x: torch.cat([x] * 40, 1).argmin(-1)),
    ("var", lambda x: x.var(-1)),
    ("var_long", lambda x: torch.cat([x] * 40, 1).var(-1)),
    ("any", lambda x: (x > 1.5).any(-1)),
    ("prod", lambda x: x[:, :9].prod(-1)),
    ("mean_keepdim", lambda x: x - x.mean(-1, keepdim=True)),
])
def test_reductions(name, fn):
    """Every reduction kind, persistent and looped, with eager's NaN rules."""
    x = torch.randn(12, 70)
    x[3, 5] = float("nan")
    _run(fn, x, tolerance={"atol": 1e-4, "rtol": 1e-4})


def test_argmax_picks_the_first_of_equal_values_and_nan():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, float("nan"), 5.0, float("nan")], [0.0, 0.0, 0.0, 0.0]])
    _run(lambda x: (x.argmax(-1), x.argmin(-1)), x)


def test_graph_with_inputs_at_offsets_and_strides():
    """Inputs that are views at storage offsets: the kernel indexes from the tensors' data."""
    base = torch.randn(10, 20)
    _run(lambda x, y: (x * y).sum(-1), base[2:7, 3:13], base.t()[1:6, :10])


def test_generated_source_is_readable_with_provenance():
    (graph,) = _run(lambda x: torch.softmax(x, -1), torch.randn(4, 8))
    source = next(iter(graph.kernels.values()))
    assert re.search(r"# buf\d+: .*aten\.amax", source)


def test_indirect_indexing_embedding_gather_and_negative_indices():
    """Data-dependent indices load through a bounds-checked index (negative ones wrapped where
    eager wraps them)."""
    table = torch.randn(50, 16)
    (graph,) = _run(lambda w, i: F.embedding(i, w) * 2, table, torch.randint(0, 50, (4, 7)))
    assert "oob_ptr" in next(iter(graph.kernels.values()))
    _run(lambda x, i: torch.gather(x, 1, i).sum(-1), torch.randn(4, 10), torch.randint(0, 10, (4, 5)))
    _run(lambda x, i: x[i] + 1, torch.randn(10, 3), torch.tensor([1, -2, 3]))


@pytest.mark.parametrize("fn, index", [
    (lambda w, i: F.embedding(i, w) * 2, torch.tensor([[1, 50]])),
    (lambda w, i: w[i] + 1, torch.tensor([1, -51, 3])),
])
def test_out_of_range_index_raises_like_eager(fn, index):
    """An index outside the table raises IndexError (after the graph's kernels, which read row 0
    instead: never memory outside the buffer; on a GPU at the next call once the GPU got there,
    or at ember.check_index_errors()); the flags are cleared, so a good call then works."""
    table = torch.randn(50, 16).to(DEVICE)
    function, _ = ember_compiled(fn)
    with pytest.raises(IndexError, match="index out of bounds"):
        function(table, index.to(DEVICE))
        ember.check_index_errors()
    good = torch.tensor([[1, 2]]).to(DEVICE) if index.dim() == 2 else torch.tensor([1, -2, 3]).to(DEVICE)
    torch.testing.assert_close(function(table, good), fn(table, good))
    ember.check_index_errors()


@pytest.mark.parametrize("fn", [
    lambda x, i, v: x.index_put((i,), v, accumulate=True),
    lambda x, i, v: x.index_put((i,), v),
    lambda x, i, v: torch.scatter_add(x, 0, i[:, None].expand(-1, 4), v),
])
def test_scatter_base_then_updates(fn):
    """index_put and scatter_add: the input copied, then the updates written (or atomically
    added) at their data-dependent rows."""
    x = torch.randn(10, 4)
    index = torch.tensor([3, 1, 7, 9, 0])  # (distinct rows: colliding plain writes have no order on a GPU)
    (graph,) = _run(fn, x, index, torch.randn(5, 4), tolerance={"atol": 1e-5, "rtol": 1e-5})
    assert len(_kernels(graph)) >= 2


def test_embedding_backward_accumulates():
    """Embedding's backward adds the gradient rows of repeated indices: atomic adds."""
    table = torch.randn(20, 8)
    graphs = _run(lambda w, i: F.embedding(i, w) * 3, table, torch.tensor([[1, 2, 1], [19, 1, 0]]), backward=True,
                  tolerance={"atol": 1e-5, "rtol": 1e-5})
    assert "tl.atomic_add" in "".join(graphs[1].kernels.values())


def test_contended_accumulating_scatter_runs_as_aten(monkeypatch):
    """Many updates into few rows (an index_put accumulating 32 rows into 2) would serialize
    atomic adds on a GPU: ATen's sorting kernel runs it instead; a spread-out one stays a Triton
    kernel.  (Embedding backwards are kept as ATen's own kernel earlier: decomp/linear.py.)"""
    from ember.lowering import scatter

    monkeypatch.setitem(scatter.ATOMIC_UPDATES_PER_ROW_LIMIT, DEVICE, 4)
    for rows, updates, atomics in ((2, 32, False), (20, 6, True)):
        function, graphs = ember_compiled(lambda x, i, v: x.index_put((i,), v * 3, accumulate=True))
        x = torch.zeros(rows, 8, device=DEVICE)
        i = torch.randint(0, rows, (updates,), device=DEVICE)
        out = function(x, i, torch.ones(updates, 8, device=DEVICE))
        expected = torch.zeros(rows, 8, device=DEVICE).index_add_(0, i, torch.full((updates, 8), 3.0, device=DEVICE))
        torch.testing.assert_close(out, expected)
        backward = graphs[-1]
        assert ("tl.atomic_add" in "".join(backward.kernels.values())) == atomics
        assert any("index_put" in name for name in backward.fallbacks) != atomics, backward.fallbacks


@pytest.mark.parametrize("shape, fn", [
    ((9000, 24), lambda x: x.sum(0)),                                    # a bias gradient's column sum
    ((9000, 24), lambda x: (x.amax(0), x.amin(0), (x > 3).any(0))),       # several, in one first pass
    ((3, 9000), lambda x: x.sum(1)),                                      # long rows, few of them
    ((9000,), lambda x: (x.sum(), (x > -9).all())),
    ((9000, 24), lambda x: (x.sum(0) * 2).to(torch.float16)),             # a pointwise epilogue after it
    ((9000, 24), lambda x: torch.var_mean(x * 3 + 1, 0)),                  # Welford: batch norm's statistics
    ((4, 4500), lambda x: torch.var_mean(x, 1, correction=0)),             # (an uneven last chunk)
    ((9000, 24), lambda x: torch.var_mean(torch.where(x > 2, float("inf"), x), 0)),  # eager's NaN
])
def test_split_reductions(shape, fn):
    """Long reductions over few outputs: a grid of (outputs, chunks) programs writes partial
    results into a workspace, then a second kernel per reduction combines them."""
    (graph,) = _run(fn, torch.randn(*shape), tolerance={"atol": 1e-3, "rtol": 1e-4})
    assert "workspace0 = torch.empty(" in graph.wrapper and "RCHUNK" in "".join(graph.kernels.values())


def test_split_reductions_share_the_calls_workspaces():
    """Every split reduction of a call writes its partial results into the same scratch tensors
    (one per workspace slot and dtype, as large as the largest use, allocated once before the
    first kernel): a ResNet-50 training step allocated 176 workspaces, one per split reduction."""
    def fn(x, y):
        return x.sum(0) + 1, torch.var_mean(y * 3, 0), (y * y).sum(0)

    (graph,) = _run(fn, torch.randn(9000, 24), torch.randn(20000, 16), tolerance={"atol": 1e-3, "rtol": 1e-4})
    allocations = [line.strip() for line in graph.wrapper.splitlines() if "= torch.empty(" in line]
    assert len(allocations) == 2, graph.wrapper  # (Welford's mean and m2 partials: two slots)
    assert graph.wrapper.count("RCHUNK") == 0 and "".join(graph.kernels.values()).count("RCHUNK") >= 3


def test_batch_norm_training_over_channels_last_splits_its_reductions():
    """Batch norm's statistics and its backward sums over a channels-last input (convolutions on
    the GPU, autograd/conv_layout.py) reduce columns over few channels: they split, their
    pointwise neighbours (running statistics, the products between the sums) in kernels of their
    own."""
    torch.manual_seed(0)
    x = torch.randn(64, 8, 16, 16).to(memory_format=torch.channels_last)
    weight, bias = torch.rand(8) + 0.5, torch.randn(8)

    def norm(x, weight, bias):
        mean, var = torch.zeros(8, device=x.device), torch.ones(8, device=x.device)
        return F.batch_norm(x, mean, var, weight, bias, training=True) * 2

    # (bias and weight gradients: sums of 16384 terms of about 2, summed in another order)
    forward, backward = _run(norm, x, weight, bias, backward=True, tolerance={"atol": 1e-2, "rtol": 1e-4})
    for graph in (forward, backward):
        assert "workspace0 = torch.empty(" in graph.wrapper, graph.wrapper


def test_no_triton_means_aten_kernels_with_one_warning(monkeypatch):
    """Without triton, graphs on CUDA tensors run as ATen calls, and ember says so once."""
    import warnings

    from ember.codegen import devices

    monkeypatch.setattr(devices, "_triton_available", lambda: False)
    devices._warn_no_triton.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert devices.missing_for("cuda") == "triton is not installed"
        assert devices.missing_for("cuda") == "triton is not installed"
    messages = [str(w.message) for w in caught if "triton is not installed" in str(w.message)]
    assert len(messages) == 1 and "pip install triton" in messages[0]
    devices._warn_no_triton.cache_clear()


def test_identical_kernels_share_one_compiled_function():
    """Kernels with the same code (a layer's, in every layer) are one Triton function, named by a
    hash of that code: Triton compiles it once."""
    def layers(x):
        for _ in range(3):
            x = torch.sigmoid(x * 2 + 1) @ torch.ones(4, 4, device=x.device)
        return x

    (graph,) = _run(layers, torch.randn(8, 4), tolerance={"atol": 1e-5, "rtol": 1e-5})
    functions = {id(launcher.function) for group in graph.launchers.values() for launcher in group}
    names = {launcher.function.__name__ for group in graph.launchers.values() for launcher in group}
    assert len(graph.launchers) >= 3 and len(functions) < len(graph.launchers), names
    assert all(name.startswith("ember_poi_") for name in names)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="compiling ahead of the call needs a GPU")
def test_kernels_compile_when_the_graph_is_built_and_launch_directly():
    """On a GPU every kernel with static sizes is compiled at build time (in threads), and calls
    with aligned tensors skip Triton's JIT dispatch; a misaligned view takes the JIT path and is
    still right."""
    function, graphs = ember_compiled(lambda x: (x * 2).softmax(-1))
    x = torch.randn(64, 300, device="cuda")
    function(x)
    launchers = [launcher for group in graphs[0].launchers.values() for launcher in group]
    assert launchers and all(launcher.compiled is not None for launcher in launchers)
    for launcher in launchers:
        launcher.function = None  # (Triton's JIT path would now fail)
    torch.testing.assert_close(function(x), (x * 2).softmax(-1))
    x = torch.randn(64 * 300 + 1, device="cuda")[1:].view(64, 300)  # (4 bytes past an aligned start)
    function, _ = ember_compiled(lambda x: (x * 2).softmax(-1))
    torch.testing.assert_close(function(x), (x * 2).softmax(-1))


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the real launcher runs (the test above)")
def test_direct_launch_lines_call_the_launcher_with_grid_stream_and_arguments(monkeypatch):
    """The wrapper's direct launches (Triton's C launcher, no Python frame in between), with a
    stand-in launcher that runs the kernel through the interpreter: every launch of an aligned
    call goes there, with extern results checked where read; a misaligned input sends the
    whole call through the checked path; the results are eager's either way."""
    from ember.codegen.triton import backend as triton_backend

    direct_calls = []

    def launch(grid_x, grid_y, grid_z, stream, launcher, *args):
        if stream == "the wrapper's":
            direct_calls.append(launcher)
        launcher.function[(grid_x, grid_y)](*args, **launcher.constexprs, num_warps=launcher.num_warps)

    def fake_precompile(launchers):
        for launcher in launchers:
            if launcher.pointer_dtypes is not None and launcher.sizes is not None:
                launcher.compiled, launcher.device = "stand-in", 0
                launcher.launch, launcher.head, launcher.tail = launch, (launcher,), ()
                launcher.pointers = len(launcher.pointer_dtypes)
                launcher.after_sizes = launcher.pointers + len(launcher.sizes)
                launcher.stream = lambda device: "the launcher's own"

    monkeypatch.setattr(triton_backend, "_finish_precompile", lambda launchers, handed: fake_precompile(launchers))
    monkeypatch.setattr(triton_backend, "_raw_stream", lambda: (lambda device: "the wrapper's"))

    def fn(x, w):
        return ((x @ w) * 2).softmax(-1) + x.sum(), (x * 3).amax(0)

    x, w = torch.randn(64, 48), torch.randn(48, 300)
    function, graphs = ember_compiled(fn)
    for ours, theirs in zip(function(x, w), fn(x, w)):
        torch.testing.assert_close(ours, theirs)
    wrapper = graphs[0].wrapper
    assert "direct = direct_launches(" in wrapper and ".data_ptr() % 16 == 0" in wrapper, wrapper
    launches = wrapper.count("else: ")
    assert launches >= 2 and len(direct_calls) == launches, wrapper
    misaligned = torch.randn(64 * 48 + 1)[1:].view(64, 48)
    for ours, theirs in zip(function(misaligned, w), fn(misaligned, w)):
        torch.testing.assert_close(ours, theirs)
    assert len(direct_calls) == launches


@pytest.mark.skipif(not torch.cuda.is_available(), reason="padding is for cuBLAS")
def test_unaligned_matmul_runs_on_padded_operands(monkeypatch):
    """A bf16 product whose rows are not 16 bytes apart (GPT-2's 50257-word head) runs on
    zero-padded copies: the padding kernels appear, and the result is eager's."""
    from ember.decomp import linear

    monkeypatch.setattr(linear, "PAD_MIN_MACS", 0)
    monkeypatch.setattr(linear, "PAD_MAX_GROWTH", 2.0)
    a = torch.randn(64, 101, dtype=torch.bfloat16)
    b = torch.randn(101, 51, dtype=torch.bfloat16)
    for fn in (lambda a, b: a @ b, lambda a, b: a.t().contiguous().t() @ b.t().contiguous().t()):
        (graph,) = _run(fn, a, b, tolerance={"atol": 1e-2, "rtol": 1e-2})
        assert graph.kernels and "aten.mm.default" in graph.fallbacks


def test_pointwise_kernels_walk_the_output_in_memory_order():
    """An output laid out transposed (eager keeps a transposed input's layout in pointwise ops)
    is walked in memory order: neighbouring lanes store neighbouring elements."""
    (graph,) = _run(lambda x: torch.exp(x.t()) * 2, torch.randn(5, 6))
    text = "".join(graph.kernels.values())
    assert "x1 = xindex % 6" in text and "tl.store(out_ptr0 + (x1 + (6 * x0))" in text, text


@pytest.mark.parametrize("shape, dims", [((5000, 5), 0), ((5, 5000), 1), ((3, 1500, 3), (0, 1))])
def test_reductions_over_the_same_rows_share_one_pass(shape, dims):
    """Sibling reductions over long rows (a layer norm's weight and bias gradients) read their
    inputs in one loop, not one loop each; results as eager's."""
    def fn(x, y):
        return (x * y).sum(dims), (x + y).amax(dims), x.sum(dims), (x > 0).any(dims)

    (graph,) = _run(fn, torch.randn(*shape), torch.randn(*shape), tolerance={"atol": 1e-3, "rtol": 1e-4})
    first = _kernels(graph)[0]
    assert first.count("for roffset") == 1, first


def test_crowded_embedding_backward_stays_atens_kernel(monkeypatch):
    """Many indices into few rows (a token-type embedding): the backward stays ATen's
    embedding_dense_backward (it sorts), not a scatter-add; gradients as eager's."""
    from ember.lowering import scatter

    monkeypatch.setitem(scatter.ATOMIC_UPDATES_PER_ROW_LIMIT, DEVICE, 4)
    function, graphs = ember_compiled(lambda w, i: F.embedding(i, w) * 3)
    w = torch.randn(2, 8, device=DEVICE, requires_grad=True)
    i = torch.randint(0, 2, (4, 8), device=DEVICE)
    function(w, i).sum().backward()
    expected = torch.zeros(2, 8, device=DEVICE).index_add_(0, i.flatten(), torch.full((32, 8), 3.0, device=DEVICE))
    torch.testing.assert_close(w.grad, expected)
    assert any("embedding_dense_backward" in name for name in graphs[-1].fallbacks), graphs[-1].fallbacks


def test_dependent_reductions_over_long_rows_are_not_split():
    """A reduction of another's result (softmax's sum of exp(x - max)) cannot be reduced in
    chunks: a chunk lacks the whole row's max; such a kernel stays unsplit, results as eager's."""
    _run(lambda x: (x - x.amax(1, keepdim=True)).exp().sum(1), torch.randn(3, 9000),
         tolerance={"atol": 1e-4, "rtol": 1e-4})


def test_a_value_read_only_where_it_is_computed_is_never_stored():
    """A shared value (stored: recomputing it in each reader costs too much) whose readers all
    fuse into its kernel stays in registers: one kernel, two stores, no buffer for it."""
    def shared(x):
        a = torch.exp(torch.erf(x * 0.7)) + 1.0
        return a * x, a - 2.0

    graph, = _run(shared, torch.randn(64, 32))
    kernels = _kernels(graph)
    assert len(kernels) == 1 and kernels[0].count("tl.store(") == 2, kernels
    assert graph.wrapper.count("empty_strided(") == 2, graph.wrapper


def test_a_value_also_read_by_another_kernel_is_stored():
    """The same value read again after a matmul (another step) is stored as before."""
    def shared(x, w):
        a = torch.exp(torch.erf(x * 0.7)) + 1.0
        return (a * x) @ w + a

    graph, = _run(shared, torch.randn(32, 32), torch.randn(32, 32), tolerance=dict(atol=1e-4, rtol=1e-4))
    assert any("tl.store(out_ptr1" in kernel for kernel in _kernels(graph)), _kernels(graph)


def test_a_kernel_touches_at_most_max_kernel_buffers():
    """Forty independent pointwise chains over one shape (BERT's backward recomputing every
    layer's LayerNorm output) split into kernels of at most MAX_KERNEL_BUFFERS pointers, not
    one kernel whose compile takes seconds."""
    MAX_KERNEL_BUFFERS = ember.config.max_kernel_buffers

    def many(*xs):
        return tuple(x * 2.0 + 1.0 for x in xs)

    graph, = _run(many, *[torch.randn(8, 16) for _ in range(40)])
    kernels = _kernels(graph)
    assert len(kernels) >= 2
    for kernel in kernels:
        signature = kernel[kernel.index("def "):kernel.index(")")]
        assert signature.count("_ptr") <= MAX_KERNEL_BUFFERS, signature


def test_pointwise_producer_of_a_looped_reduction_runs_in_its_loop(monkeypatch):
    """A copy that is also reduced (GPT-2's logits: the padded product's slice made contiguous,
    then cross-entropy's max over each row) is computed and stored inside the reduction's first
    loop, not in a kernel of its own that the reduction reads back; results as eager's."""
    from ember.codegen.triton import kernel as triton_codegen
    from ember.codegen.triton import split as triton_split
    from ember.scheduling.gpu_partition import GpuLimits

    monkeypatch.setattr(triton_codegen, "PERSISTENT_RNUMEL", 32)  # rows of 200: looped
    monkeypatch.setattr(triton_split, "gpu_limits", lambda: GpuLimits(split_min_rnumel=1 << 30))

    def loss(product, labels):
        logits = product[:, :200].contiguous().view(2, -1, 200)
        return F.cross_entropy(logits.float().view(-1, 200), labels), logits

    graph, = _run(loss, torch.randn(64, 208).to(torch.bfloat16), torch.randint(0, 200, (64,)))
    kernels = _kernels(graph)
    first = next(kernel for kernel in kernels if "_ember_max(acc" in kernel)
    loop = first.split("for roffset", 1)[1].split("tl.reduce", 1)[0]
    assert "tl.store(out_ptr" in loop and "rmask)" in loop, first
    assert not any("_ember_max" not in kernel and "(208 * x0)" in kernel for kernel in kernels), kernels


def _conv_batch_norm():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()), \
        torch.randn(2, 3, 6, 6)


def _linear_layer_norm():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16)), torch.randn(4, 8)


@pytest.mark.parametrize("build", [_linear_layer_norm, _conv_batch_norm], ids=["layer_norm", "batch_norm"])
def test_training_backward_is_begun_while_the_forward_compiles(monkeypatch, build):
    """A training graph's backward is lowered and its kernels handed to the compilers before the
    forward's finish (their compiles overlap in the workers), and finished at its first call;
    gradients as eager's.  Batch norm saves its (1, C, 1, 1) statistics, which come back with
    strides (0, 1, 0, 0) where the trace had (C, 1, 1, 1): the begun backward is still the one
    taken (a dimension of size 1 has no stride that matters; a second backward compile would
    show as a third "start")."""
    from ember.codegen.devices import kernel_backend

    events = []
    backend = kernel_backend(DEVICE)  # (the build and load steps call its start_build, finish_build)
    start_build, finish_build = backend.start_build, backend.finish_build

    def starting(sources):
        events.append("start")
        return start_build(sources)

    def finishing(started):
        events.append("finish")
        return finish_build(started)

    monkeypatch.setattr(backend, "start_build", starting)
    monkeypatch.setattr(backend, "finish_build", finishing)
    torch.manual_seed(0)
    model, x = build()
    model, x = model.to(DEVICE), x.to(DEVICE)
    state = copy.deepcopy(model.state_dict())
    out = ember.compile(model)(x)
    assert events == ["start", "start", "finish"], events
    out.sum().backward()
    assert events == ["start", "start", "finish", "finish"], events
    ours = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.load_state_dict(state)
    model(x).sum().backward()
    for a, p in zip(ours, model.parameters()):
        torch.testing.assert_close(a, p.grad)


def test_gradients_have_eagers_strides_in_dimensions_of_size_one():
    """A 1x1 convolution's weight gradient (channels-last convolutions: the backward's result
    reinterpreted) leaves with eager's strides (8, 1, 1, 1), not (8, 1, 0, 0): autograd's layout
    contract reads size-1 strides too and clones a gradient that breaks it (ResNet-50: 36 weights)."""
    conv = torch.nn.Conv2d(8, 4, 1).to(DEVICE)
    x = torch.randn(2, 8, 5, 5, device=DEVICE)
    with ember.config.patch(channels_last_convolutions="cpu,cuda"):
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            out = ember.compile(conv)(x)
        (grad,) = torch.autograd.grad(out.float().sum(), conv.weight)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        (expected,) = torch.autograd.grad(conv(x).float().sum(), conv.weight)
    assert grad.stride() == expected.stride() == (8, 1, 1, 1)
    torch.testing.assert_close(grad, expected, atol=1e-2, rtol=1e-2)


def test_float32_to_bfloat16_rounds_to_nearest_even():
    """Values are stored in bfloat16 rounded to nearest, ties to even, as eager rounds (a GPU's
    `.to(tl.bfloat16)`; under the interpreter, tests/triton_rounding.py)."""
    x = torch.tensor([-3.8733941, 3.8733941, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 3.3895e38, -0.0])
    (graph,) = _run(lambda x: (x * 1.0).to(torch.bfloat16), x)


def test_bias_add_and_gelu_over_other_dims_are_one_kernel(monkeypatch):
    """The add stored as [20, 32] and the GELU reading it as [4, 5, 32]: one kernel, two stores
    (ViT's and BERT's MLP in training: 1.35 ms of two kernels per step on an H100).  With the
    bias epilogue off: on CUDA the stored sum would become addmm and leave the GELU alone."""
    from ember.lowering import bias_epilogue
    monkeypatch.setattr(bias_epilogue, "DEVICES", set())
    def f(a, w, b):
        h = torch.mm(a.reshape(20, 16), w) + b
        return h, torch.nn.functional.gelu(h.view(4, 5, 32))

    (graph,) = _run(f, torch.randn(4, 5, 16), torch.randn(16, 32), torch.randn(32))
    (kernel,) = _kernels(graph)
    assert kernel.count("tl.store(") == 2


@pytest.mark.parametrize("length", [4, 300])
def test_welford_mean_of_an_infinity_meeting_later_values_is_nan(length):
    """Eager's Welford mean is NaN once an infinity meets a later value (inf - inf), on the CPU
    and on a GPU.  (An infinity last in its row is the mean on the CPU and NaN or not on a GPU,
    by the row's length and its threads: not tested; the fuzzer's conditioning excuses it.)"""
    x = torch.randn(3, length, dtype=torch.float64)
    x[1, length // 2] = float("inf")
    x[2, 0] = float("-inf")
    assert _run(lambda x: torch.var_mean(x, -1, correction=0), x)


def _difference_of_a_product_with_itself(a):
    v0 = a.prod()
    v1 = v0 * v0
    return a.t() + (v1 - v1), (v1 - v1) * v0, (a.sum() * 1e11) ** 2 - (a.sum() * 1e11) ** 2


def test_a_product_minus_itself_is_zero_no_fused_multiply_add():
    """A product and its own difference in one kernel: a contracted fma(x, x, -x*x) gives x*x's
    rounding error (1e24 on an H200 where eager gives 0), so kernels compile without fp fusion
    (the values are checked on a GPU; the interpreter never fuses)."""
    from ember.codegen.triton import backend as triton_backend

    assert triton_backend.COMPILE_OPTIONS["enable_fp_fusion"] is False
    a = (torch.randn((17, 4), generator=torch.Generator().manual_seed(70022901)) * 3.0)[1:]
    _run(_difference_of_a_product_with_itself, a, tolerance={"rtol": 0, "atol": 0})


def test_subnormal_inputs_are_not_flushed_to_zero():
    """eager's CUDA kernels keep subnormals: rsqrt(1.5e-39) is 2.6e19 (not inf), ceil(1e-40) is 1
    (not 0); Triton's approximate rsqrt and libdevice's default flush them."""
    x = torch.tensor([1.4693679e-39, 1e-40, -1e-40, 2.0, 0.0])
    _run(lambda x: (x.rsqrt(), x.ceil(), x.floor(), x * 3), x, tolerance={"rtol": 1e-6, "atol": 0})
    if DEVICE == "cuda":  # (libdevice only on a GPU)
        _run(lambda x, y: torch.atan2(x, y), x, x.flip(0) + 1e-39, tolerance={"rtol": 1e-6, "atol": 0})


@pytest.mark.parametrize("reduce", ["min", "max", "median"])
def test_a_nan_gradient_through_a_full_min_spreads_as_eagers_on_the_device(reduce):
    """eager's min()/max()/median() backward scatters into zeros on the CPU but multiplies a mask
    on CUDA, where a NaN gradient makes every element NaN: ember follows the device."""
    def f(x):
        selected = getattr(x, reduce)()
        return torch.std(selected.reshape(1))  # the std of one value: NaN, and so is its gradient

    x = torch.randn(6, 5, device=DEVICE)
    function, _ = ember_compiled(f)
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    function(ours).backward()
    f(theirs).backward()
    torch.testing.assert_close(ours.grad, theirs.grad, equal_nan=True, rtol=0, atol=0)


def test_sign_of_negative_low_precision_values_fused_into_a_log_softmax():
    """Fuzz lowp 700735 on an H200: sign spelled where(x > 0, 1, where(x < 0, -1, 0)) came out +1
    for negative bfloat16 values once fused with a log_softmax and its layer_norm (Triton 3.6),
    so the variance after them was 104448 where eager's is 76288.  Now spelled as the difference
    of two comparisons; a bool's sign is itself."""
    generator = torch.Generator().manual_seed(70073503)
    c = (torch.randn((7, 7, 5, 4), generator=generator) * 10.0).to(torch.bfloat16)
    d = (torch.randn((5, 4), generator=generator) * 300.0).to(torch.bfloat16)
    e = (torch.rand((5, 4), generator=generator) + 0.1).to(torch.bfloat16)

    def program(c, d, e):
        return F.layer_norm(c.sign().log_softmax(0), (5, 4), d, e, eps=1e-3).float().sum((0, 1, 2))

    _run(program, c, d, e, tolerance={"atol": 1e-2, "rtol": 1e-3})
    _run(lambda x: torch.sign(x).logical_not(), torch.tensor([True, False, True]))
    _run(lambda x: torch.sign(x) * 3, torch.tensor([-2, 0, 5], dtype=torch.int8))


def test_variance_of_equal_values_is_exactly_zero():
    """Fuzz stats 702024 on an H200: the variance of 8 equal values (an expanded input times 1e6)
    was 1e-3, not 0: a GPU thread adds its elements in order, 8x came out rounded, and the mean
    sum / n was not x.  The mean is refined by the mean deviation from it (x exactly here, as
    eager's Welford gives); 3 equal values show the rounding in the interpreter too."""
    x = torch.tensor([0.18419209122657776]).expand(3, 2)

    def program(t):
        return torch.var(t, 0), torch.var_mean(t * 1e6, 0, correction=0)

    _run(program, x)
    out = ember_compiled(program)[0](x.to(DEVICE))
    assert out[0].eq(0).all() and out[1][0].eq(0).all()
    assert out[1][1].eq((x * 1e6)[0].to(DEVICE)).all()


def test_relu_of_negative_zero_keeps_eagers_sign():
    """Fuzz special 705232 on an H200: eager's CUDA relu(-0.0) is +0.0 (its CPU kernel's -0.0), so
    atan2(relu(x), relu(x)) is 0 there, and ember's -pi made log1p NaN.  (1 / relu shows the sign:
    checked against the CPU's kernel in the interpreter, the CUDA one's on a GPU.)"""
    x = torch.tensor([-0.0, 0.0, -1.0, 2.0, float("nan")])
    _run(lambda t: 1 / torch.relu(t) + torch.relu(t), x)


@pytest.mark.parametrize("shape", [(), (1,), (8,), (3, 64)], ids=str)
def test_a_sum_of_negative_zeros_is_positive_zero_as_in_eager(shape):
    """Eager's sum starts from +0.0: a sum of -0.0s is +0.0, and the sign shows through atan2
    and division (fuzz lowp 708927 on an H200: tl.sum of one -0.0 kept it, atan2 gave -pi);
    here 1 / sum is +inf, not -inf.  (Triton's interpreter sums through numpy, which gives +0.0
    either way: the test tells only on a GPU.)"""
    x = torch.full(shape, -0.0).to(DEVICE)
    fn = lambda x: 1.0 / (x.sum(-1 if shape else 0, keepdim=True) * 2)  # noqa: E731
    function, graphs = ember_compiled(fn)
    assert torch.equal(function(x), fn(x))
    assert any("tl.sum" in source for source in graphs[0].kernels.values())


def test_an_amax_over_an_expanded_view_at_an_offset_reads_the_view():
    """GPU fuzz stats 710099: `a[1::2].expand(2, -1, 5, -1).amax((0, 2, 3))` loaded from
    `in_ptr0 + (45 + r0_2 + 9 * r0_1)` with r0_1 = (r // 9) % 5, r0_2 = r % 9; Triton 3.6 drops
    the 45 of such an address block with 4 or more warps and read a[0] (2.17415, not 3).  The
    constant term of every address now sits on the pointer; the result is eager's on a GPU (the
    interpreter computes the addresses as written either way)."""
    def fn(a):
        return a[1::2].expand(2, -1, 5, -1).amax((0, 2, 3))

    a = torch.randn(2, 5, 9)
    a.view(-1)[[51, 75]] = torch.tensor([float("-inf"), 3.0])
    (graph,) = _run(fn, a)
    (kernel,) = _kernels(graph)
    assert "(in_ptr0 + 45) + " in kernel, kernel


def test_the_constant_of_every_address_sits_on_the_pointer():
    """Stores went wrong alike on the GPU (`out_ptr0 + (45 + r % 9 + 9 * ((r // 9) % 5))` wrote
    from element 0 with 4 warps): loads, stores and scatters all take their pointer from here.
    A constant address (one element) keeps its pointer; so does one without a constant term."""
    import sympy

    from ember.codegen.triton.ops import on_pointer

    r1, r2 = sympy.symbols("r0_1 r0_2", integer=True, nonnegative=True)
    assert on_pointer("out_ptr0", 45 + r2 + 9 * r1) == ("(out_ptr0 + 45)", r2 + 9 * r1)
    assert on_pointer("in_ptr1", -3 + r2) == ("(in_ptr1 - 3)", r2)
    assert on_pointer("in_ptr1", sympy.Integer(7)) == ("in_ptr1", 7)
    assert on_pointer("in_ptr1", r2 + 9 * r1) == ("in_ptr1", r2 + 9 * r1)


def test_a_triton_kernel_that_does_not_compile_runs_its_graph_as_aten_calls(monkeypatch, caplog):
    """Triton's rejection of a generated kernel was its own KernelCompileError class, which the
    graph compiler (catching the C++ one) let through to the user's call.  One class now: the
    graph runs as ATen calls, with a logged reason, as for a kernel g++ rejects."""
    import logging

    from ember.codegen.triton import backend as triton_backend
    from ember.codegen.kernel import KernelCompileError

    def rejected(source, name):
        raise KernelCompileError(f"ember: Triton could not compile a generated kernel ({name})")

    monkeypatch.setattr(triton_backend, "load_kernel", rejected)
    x = torch.randn(8, 5, device=DEVICE)
    ember.reset()
    with caplog.at_level(logging.DEBUG, logger="ember.fallbacks"):
        got = ember.compile(lambda v: (v.sin() * 2).sum(1))(x)
    ember.reset()
    torch.testing.assert_close(got, (x.sin() * 2).sum(1))
    assert "a kernel did not build" in caplog.text
