"""Bad input for the code generator: clear errors, or an ATen fallback that keeps results right."""
import pytest
import torch

import ember

from ember.autograd import aot_function
from ember.codegen import cpp_build
from ember.codegen.compile import compile_graph


def test_missing_compiler_names_gpp_and_how_to_install(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/g++-none")
    cpp_build.compiler.cache_clear()
    try:
        with pytest.raises(cpp_build.CompilerNotFound, match=r"g\+\+.*apt-get install g\+\+"):
            cpp_build.compiler()
    finally:
        monkeypatch.delenv("CXX")
        cpp_build.compiler.cache_clear()


def test_kernel_that_fails_to_compile_names_its_source(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    with pytest.raises(cpp_build.KernelCompileError, match=r"source is .*k_[0-9a-f]+\.cpp"):
        cpp_build.build('extern "C" void broken( { this is not C++ }')


def test_unsupported_dtype_falls_back_to_aten_with_correct_results():
    graphs = []

    def compiler(gm, example_inputs):
        graph = compile_graph(gm, example_inputs)
        graphs.append(graph)
        return graph

    f = aot_function(lambda x, y: (x * y + 1).exp(), compiler)
    x, y = torch.randn(4, 4, dtype=torch.complex64), torch.randn(4, 4, dtype=torch.complex64)
    torch.testing.assert_close(f(x, y), (x * y + 1).exp())
    assert graphs[0].fallbacks  # complex numbers run as ATen calls
    assert not graphs[0].kernels


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_inputs_run_as_aten_calls_with_a_reason(layout, caplog):
    """ember's kernels read strided memory; a sparse value made `ptr()` fail ("Cannot access
    data pointer"). Such graphs run as ATen calls, and EMBER_LOGS=fallbacks says why."""
    import logging

    dense = torch.randn(4, 4)
    x = dense.to_sparse() if layout == "coo" else dense.to_sparse_csr()
    y = torch.randn(4, 4)
    fn = (lambda x, y: (x * 3).to_dense() + y) if layout == "coo" else (lambda x, y: (x * 2).to_dense() + y)
    with caplog.at_level(logging.DEBUG, logger="ember"):
        got = ember.compile(fn, backend="ember")(x, y)
    torch.testing.assert_close(got, fn(x, y))
    if layout == "coo":
        assert "sparse_coo tensors" in caplog.text
