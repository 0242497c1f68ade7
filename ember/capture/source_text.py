"""Generated Python source: text made safe to paste into it, and glue that reads as the user's code.

Everything ember writes into generated source (glue and guard functions) goes through here:

- `comment(text)`: a reason or a description pasted into a `#` comment.  Graph-break reasons
  carry user exception messages and fake-tensor errors, which may hold newlines (the rest of
  the message would become code), NUL bytes or lone surrogates (compile() refuses both).
- `keyword_arguments(...)`: `name=value` where `name` is an identifier, `**{'a-b': value}`
  otherwise (a `**kwargs` dict may hold any string key).
- `compile_as_user_code(...)`: compiles a glue function so that every one of its lines is
  the user's own line (file, line number and source text in a traceback), and its frame
  bears the user's function name.  An exception raised by user code that the glue runs (the
  instruction a graph broke on, a `raise`) then shows where it came from, not `<ember glue>`.
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

    The statements are re-numbered in the syntax tree rather than padded with blank lines:
    all of a glue's statements stand for one user line (where the graph stopped), which plain
    text cannot express.  Column offsets span that whole line, so a traceback prints the
    user's line without carets pointing into glue-sized columns."""
    tree = ast.parse(source)
    line = lineno or user_code.co_firstlineno
    text = linecache.getline(user_code.co_filename, line)
    stripped = text.rstrip()
    start = len(stripped) - len(stripped.lstrip())
    end = len(stripped.encode("utf-8"))
    start = len(stripped[:start].encode("utf-8"))
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
