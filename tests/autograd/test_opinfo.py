"""OpInfo sweep: every op's first float32 sample through ember's AOT autograd (decompositions on),
with the graphs run as they are ("aot_eager") and compiled to C++ kernels ("ember").

Forward for every op; backward for the ops that support autograd.  Ops that fail are listed in
opinfo_expected_failures.py with the reason; the test fails when a listed op starts to pass
(so the list only shrinks).  Regenerate the list with

    EMBER_REGEN_OPINFO=1 python -m pytest tests/autograd/test_opinfo.py
"""
import os
import sys

import pytest

pytest.importorskip("expecttest")
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import opinfo_expected_failures as expected  # noqa: E402
import opinfo_sweep  # noqa: E402

REGEN = os.environ.get("EMBER_REGEN_OPINFO", "") not in ("", "0")


def _torch_minor() -> str:
    """"2.11" for torch 2.11.0+cu130: the key of version-specific expected failures."""
    import torch

    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


def _key(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _sweep(kind: str, backend: str) -> tuple[dict[str, str], dict[str, int]]:
    failures, fallback_ops = {}, {}
    for op in op_db:
        opinfo_sweep.FALLBACKS.clear()
        reason = opinfo_sweep.check(op, kind, backend)
        if reason is not None:
            failures[_key(op)] = reason
        for name in opinfo_sweep.FALLBACKS:
            fallback_ops[name] = fallback_ops.get(name, 0) + 1
    return failures, fallback_ops


TABLES = {("aot_eager", "forward"): "FORWARD", ("aot_eager", "backward"): "BACKWARD",
          ("ember", "forward"): "EMBER_FORWARD", ("ember", "backward"): "EMBER_BACKWARD"}
TARGETS = {("aot_eager", "forward"): 0.98, ("aot_eager", "backward"): 0.95,
           ("ember", "forward"): 0.95, ("ember", "backward"): 0.95}  # the issues' targets on CPU


# Failures that only one torch version has are kept by hand in the file, from this line on
# (a regeneration sees one version): it carries them over.
_ON_TORCH_MARK = "# Failures on one torch version only"


def _regenerate(results: dict) -> None:
    path = os.path.join(os.path.dirname(__file__), "opinfo_expected_failures.py")
    lines = ['"""Ops that do not yet pass the OpInfo sweep, with the reason each fails (generated:',
             'EMBER_REGEN_OPINFO=1 python -m pytest tests/autograd/test_opinfo.py)."""', ""]
    for key, name in TABLES.items():
        table = results.get(key, (getattr(expected, name, {}), {}))[0]
        lines.append(f"{name} = {{")
        for op in sorted(table):
            lines.append(f"    {op!r}: {table[op]!r},")
        lines.append("}")
        lines.append("")
    with open(path) as handle:  # the hand-kept per-version part, as the file has it now
        current = handle.read()
    lines.append(current[current.index(_ON_TORCH_MARK):])
    with open(path, "w") as handle:
        handle.write("\n".join(lines))


_RESULTS: dict = {}


@pytest.fixture(scope="module")
def results():
    yield _RESULTS
    if REGEN and len(_RESULTS) == len(TABLES):
        _regenerate(_RESULTS)


@pytest.mark.parametrize("backend,kind", list(TABLES), ids=[f"{b}-{k}" for b, k in TABLES])
def test_opinfo_sweep(results, backend, kind):
    failures, fallback_ops = _sweep(kind, backend)
    results[(backend, kind)] = (failures, fallback_ops)
    listed = getattr(expected, TABLES[(backend, kind)], {})
    total = len(op_db)
    passed = total - len(failures)
    print(f"\n[opinfo {backend} {kind}] {passed}/{total} ops pass ({100 * passed / total:.1f}%)")
    if backend == "ember":
        from ember.lowering.lowerings import EXTERN_OPS

        fallbacks = {name: n for name, n in fallback_ops.items() if name not in {str(op) for op in EXTERN_OPS}}
        print(f"[opinfo ember {kind}] ATen fallbacks (op: number of samples): {dict(sorted(fallbacks.items()))}")
    if REGEN:
        return
    listed = {**listed, **expected.ON_TORCH.get(_torch_minor(), {}).get(TABLES[(backend, kind)], {})}
    new_failures = {k: v for k, v in failures.items() if k not in listed}
    now_passing = sorted(k for k in listed if k not in failures)
    assert not new_failures, f"ops that fail and are not in the expected-failures list: {new_failures}"
    assert not now_passing, f"expected failures that now pass (remove them from the list): {now_passing}"
    assert passed / total >= TARGETS[(backend, kind)]


def test_cuda_expected_failures_name_real_ops_for_every_swept_case():
    """The CUDA list (checked against a GPU run by opinfo_report) names OpInfo entries that exist,
    for each dtype and direction the GPU sweep runs, under each torch version it keeps."""
    import opinfo_expected_failures_cuda as cuda

    names = {f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name for op in op_db}
    assert cuda.expected_failures("2.11.0+cu130", "float32", "forward") is not None
    assert cuda.expected_failures("9.9.0", "float32", "forward") is None
    for lists in cuda.EXPECTED.values():
        assert set(lists) == {(d, k) for d in ("float32", "bfloat16") for k in ("forward", "backward")}
        for failing in lists.values():
            assert set(failing) <= names, set(failing) - names
