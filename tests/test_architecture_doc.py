"""ARCHITECTURE.md stays one page that names every module of the package (issue 33): a module
added or moved without its line there fails here."""
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORD_LIMIT = 1600  # "about 1,500 words"


def _doc() -> str:
    return (ROOT / "ARCHITECTURE.md").read_text()


def test_every_module_has_its_line():
    doc = _doc()
    missing = []
    for path in sorted((ROOT / "ember").rglob("*.py")):
        relative = path.relative_to(ROOT / "ember").as_posix()
        if path.name == "__init__.py":
            # a package's __init__ is named where it holds more than a docstring and imports
            if relative != "__init__.py" and not _has_code(path):
                continue
            named = relative in doc or (relative.count("/") == 1 and f"`{path.name}`" in _section(doc, relative))
        else:
            named = relative in doc or f"`{path.name}`" in _section(doc, relative)
        if not named:
            missing.append(relative)
    assert not missing, f"modules without a line in ARCHITECTURE.md: {missing}"


def test_it_stays_one_page():
    words = len(_doc().split())
    assert words <= WORD_LIMIT, f"ARCHITECTURE.md has {words} words (at most about 1,500: history belongs in git log)"


def _section(doc: str, relative: str) -> str:
    """The part of the document about the module's package (from `package/` to the next blank line)."""
    package = os.path.dirname(relative)
    if not package:
        return doc
    start = doc.find(f"(`{package.split('/')[0]}/`)")
    start = doc.find(f"`{package}/`") if start < 0 else start
    if start < 0:
        return ""
    end = doc.find("\n\n", start)
    return doc[start:end if end > 0 else len(doc)]


def _has_code(path: pathlib.Path) -> bool:
    import ast

    body = ast.parse(path.read_text()).body
    def declares_exports(node) -> bool:
        return isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]

    return any(not isinstance(node, (ast.Expr, ast.Import, ast.ImportFrom)) and not declares_exports(node)
               for node in body)
