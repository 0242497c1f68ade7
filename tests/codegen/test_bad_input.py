"""Bad input for the code generator: clear errors, or an ATen fallback that keeps results right."""
import pytest
import torch

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
