"""The pipeline's import direction is a checked contract (pyproject.toml, [tool.importlinter]):
each of ember's packages imports only the layers below it (the driver on top, the stages in
reverse pipeline order, the shared facts on the floor), and no two packages import each other.
Function-level imports count as much as top-level ones."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _lint_imports(root) -> tuple[int, str]:
    """import-linter over the ember package under `root`, in a process of its own (it finds the
    package on sys.path)."""
    pytest.importorskip("importlinter", reason="import-linter is a test dependency (pip install -e .[test])")
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


def test_packages_import_only_downward_and_without_cycles():
    exit_code, report = _lint_imports(ROOT)
    assert exit_code == 0, report
    assert "3 kept, 0 broken" in report, report


def test_the_contract_catches_an_upward_import(tmp_path):
    """The contract is not vacuous: a copy of the package where capture imports codegen fails it."""
    shutil.copytree(os.path.join(ROOT, "ember"), tmp_path / "ember", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path / "pyproject.toml")
    with open(tmp_path / "ember" / "capture" / "graph.py", "a") as file:
        file.write("\n\ndef _upward():\n    from ..codegen import wrapper  # noqa: F401\n")
    exit_code, report = _lint_imports(tmp_path)
    assert exit_code != 0, report
    assert "ember.capture is not allowed to import ember.codegen" in report, report


def test_the_kernel_backends_do_not_import_each_other(tmp_path):
    """The C++ and Triton backends share codegen/kernel.py, not each other's modules: a copy of
    the package where the Triton backend imports the C++ one fails the contract."""
    shutil.copytree(os.path.join(ROOT, "ember"), tmp_path / "ember", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path / "pyproject.toml")
    with open(tmp_path / "ember" / "codegen" / "triton" / "ops.py", "a") as file:
        file.write("\n\ndef _across():\n    from ..cpp import build  # noqa: F401\n")
    exit_code, report = _lint_imports(tmp_path)
    assert exit_code != 0, report
    assert "the two kernel backends share only codegen's emitter BROKEN" in report, report


def test_every_internal_import_names_a_module_that_exists():
    """Relative imports (also inside functions, which run late) resolve to ember's files: a module
    moved to another package leaves no import behind that only fails when its line runs.
    (import-linter skips imports of modules that do not exist.)"""
    import ast
    import pathlib

    package = pathlib.Path(ROOT) / "ember"
    missing = []
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        here = parts if parts[-1] == "__init__" else parts[:-1]
        here = [p for p in here if p != "__init__"]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            base = here[:len(here) - node.level + 1]
            target = pathlib.Path(ROOT, *base, *(node.module.split(".") if node.module else []))
            candidates = [target] if node.module else [target / alias.name for alias in node.names]
            for candidate in candidates:
                exists = candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file()
                if not exists and (node.module or not _defined_in(candidate.parent, candidate.name)):
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: {'.' * node.level}{node.module or ''} "
                                   f"import {', '.join(a.name for a in node.names)}")
    assert not missing, "imports of modules that do not exist:\n  " + "\n  ".join(missing)


def _defined_in(package_dir, name: str) -> bool:
    """`from . import name` of a name the package's __init__ defines rather than a submodule."""
    init = package_dir / "__init__.py"
    return init.is_file() and name in init.read_text()
