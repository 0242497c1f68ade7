"""Generated Python source: text made safe to paste into it, and glue that reads as the user's code.

- `comment(text)`: text for a `#` comment (break reasons may hold newlines, NULs or lone
  surrogates, which would become code or which compile() refuses).
- `keyword_arguments(...)`: `name=value`, or `**{'a-b': value}` where `name` is no identifier.
- `compile_as_user_code(...)`: a glue function whose lines are the user's own line (file, line
  and text in a traceback) and whose frame bears the user's function name, so an exception the
  glue runs shows where it came from, not `<ember glue>`.
"""
from __future__ import annotations

import ast
import keyword
import linecache
import types
from typing import Iterable


def comment(text: str) -> str:
    """`text` as one line that is safe inside a `#` comment."""
    return "".join(char if char.isprintable() else _escape(char) for char in str(text))


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def is_keyword_name(name: object) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def keyword_arguments(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """Call-argument text for (name, value expression) pairs."""
    plain, odd = [], []
    for name, value in pairs:
        if is_keyword_name(name):
            plain.append(f"{name}={value}")
        else:
            odd.append(f"{name!r}: {value}")
    if odd:
        plain.append("**{" + ", ".join(odd) + "}")
    return plain


def compile_as_user_code(source: str, function_name: str, user_code: types.CodeType, lineno: int | None,
                         namespace: dict, named_as: types.CodeType | None = None) -> types.FunctionType:
    """exec `source` (one `def function_name(...)`) so that its lines are `user_code`'s line `lineno`
    and its frames bear the name of `named_as` (the user's function, also for a resume function's glue).
    Statements are re-numbered in the syntax tree (all stand for one user line), with column offsets
    spanning that whole line, so a traceback's carets do not point into glue-sized columns."""
    tree = ast.parse(source)
    line = lineno or user_code.co_firstlineno
    stripped = linecache.getline(user_code.co_filename, line).rstrip()
    start = len(stripped[:len(stripped) - len(stripped.lstrip())].encode("utf-8"))
    end = len(stripped.encode("utf-8"))
    for node in ast.walk(tree):
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = line
            node.col_offset, node.end_col_offset = (start, end) if end else (0, 0)
    definition = tree.body[0]
    definition.lineno = definition.end_lineno = user_code.co_firstlineno
    exec(compile(tree, user_code.co_filename, "exec"), namespace)
    function = namespace[function_name]
    named_as = named_as or user_code
    function.__code__ = function.__code__.replace(co_name=named_as.co_name, co_qualname=named_as.co_qualname)
    return function
