"""Bad input for the code generator: clear errors, or an ATen fallback that keeps results right."""
import pytest
import torch

import ember

from ember.autograd import aot_function
from ember.codegen.cpp import build as cpp_build
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


def _refusing_compiler(tmp_path, refused_levels):
    """A stand-in for g++ that stops with an internal compiler error at the given -O levels (as
    g++ 12 did on a kernel of erf, xlogy, signbit and an integer pow: issue 32), else runs g++."""
    script = tmp_path / "refusing-g++"
    levels = " ".join(refused_levels)
    script.write_text(f"""#!/bin/sh
for arg in "$@"; do
  for level in {levels}; do
    if [ "$arg" = "$level" ]; then
      echo "k.cpp:12:1: error: unrecognizable insn:" >&2
      echo "during RTL pass: vregs" >&2
      echo "k.cpp:12:1: internal compiler error: in extract_insn, at recog.cc:2791" >&2
      exit 1
    fi
  done
done
exec {cpp_build.compiler()} "$@"
""")
    script.chmod(0o755)
    return str(script)


def _issue_32_kernel(a, b, c):
    x = torch.special.erf(a) + torch.xlogy(a.abs(), b.abs())
    x = torch.where(torch.signbit(a), x, x * 2)
    y = c.pow(3)
    return torch.diagonal(x) + (x @ b).sum(-1), y


def _refused_run(tmp_path, monkeypatch, caplog, refused_levels):
    import logging

    compiler = _refusing_compiler(tmp_path, refused_levels)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", compiler)
    cpp_build.compiler.cache_clear()
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 5, generator=gen), torch.randn(5, 5, generator=gen)
    c = torch.randint(-4, 5, (6,), generator=gen)
    try:
        ember.reset()
        with ember.config.patch(cache_dir=""), caplog.at_level(logging.DEBUG, logger="ember.fallbacks"):
            got = ember.compile(_issue_32_kernel, backend="ember")(a, b, c)
    finally:
        monkeypatch.delenv("CXX")
        cpp_build.compiler.cache_clear()
        ember.reset()
    for ours, theirs in zip(got, _issue_32_kernel(a, b, c)):
        torch.testing.assert_close(ours, theirs)
    return caplog.text


def test_kernel_the_compiler_rejects_at_O3_is_built_at_a_lower_level(tmp_path, monkeypatch, caplog):
    """A kernel g++ fails on at -O3 (an internal compiler error) is built at -O1, with a logged
    reason, instead of failing the call with KernelCompileError."""
    text = _refused_run(tmp_path, monkeypatch, caplog, ["-O3"])
    assert "built with -O1: -O3 failed" in text and "internal compiler error" in text
    assert "a kernel did not build" not in text


def test_kernel_the_compiler_rejects_at_every_level_runs_its_graph_as_aten_calls(tmp_path, monkeypatch, caplog):
    """A kernel g++ rejects at -O3, -O1 and -O0: the graph runs as ATen calls, the results are
    eager's, and EMBER_LOGS=fallbacks says why."""
    text = _refused_run(tmp_path, monkeypatch, caplog, ["-O3", "-O1", "-O0"])
    assert "graph not compiled (a kernel did not build" in text and "tried -O3; -O1; -O0" in text
