"""A fuzz program: its inputs, its straight-line statements and its outputs, printed as Python source.

Statements keep what the generator knew about them (which names they read, define and write in
place, and whether their results carry rounding noise), so the harness can tell noise from errors
and the minimizer can drop, rename and rebuild statements without parsing the source back.
"""
from __future__ import annotations

import dataclasses
import io
import tokenize

import warnings

import torch

from .inputs import InputSpec, render_input, render_make_inputs

HEADER = '''import os

import torch
import torch.nn.functional as F

# where the inputs live (EMBER_FUZZ_DEVICE=cuda: ember's Triton kernels on a GPU)
DEVICE = os.environ.get("EMBER_FUZZ_DEVICE", "cpu")


def gen(seed):
    return torch.Generator().manual_seed(seed)
'''

MAIN = '''

if __name__ == "__main__":
    import ember
    inputs, _ = make_inputs()
    print("eager:", program(*inputs))
    inputs, _ = make_inputs()
    print("{backend}:", ember.compile(program, backend="{backend}")(*inputs))
'''


@dataclasses.dataclass
class Statement:
    text: str                    # one line of Python
    op: str                      # the op's name, for failure signatures
    defs: tuple[str, ...] = ()   # names it assigns
    uses: tuple[str, ...] = ()   # names it reads
    mutates: tuple[str, ...] = ()  # names whose tensor it writes in place
    view_of: str | None = None   # its results share storage with this name
    # Per defined name: float results carry rounding noise ("rounds"); results jump when an
    # input moves a little (comparisons, floor, argmax, ...: "jumps").
    rounds: tuple[bool, ...] = ()
    jumps: tuple[bool, ...] = ()

    def renamed(self, mapping: dict[str, str]) -> "Statement":
        """This statement with names replaced (all at once) by `mapping`."""
        def swap(names):
            return tuple(mapping.get(name, name) for name in names)
        return dataclasses.replace(
            self, text=rename_in_source(self.text, mapping), defs=swap(self.defs), uses=swap(self.uses),
            mutates=swap(self.mutates), view_of=mapping.get(self.view_of, self.view_of) if self.view_of else None)


def rename_in_source(text: str, mapping: dict[str, str]) -> str:
    """Replace variables by `mapping` (not attributes or keyword names of the same spelling)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    out, depth = [], 0
    for index, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        previous = tokens[index - 1].string if index else ""
        following = tokens[index + 1].string if index + 1 < len(tokens) else ""
        keyword = depth > 0 and following == "="
        if token.type == tokenize.NAME and token.string in mapping and previous != "." and not keyword:
            token = token._replace(string=mapping[token.string])
        out.append(token)
    return _untokenize(out)


def _untokenize(tokens) -> str:
    """Source from tokens, keeping the original spacing (names may change length)."""
    pieces, last_end = [], None
    for token in tokens:
        if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT):
            continue
        if last_end is not None and token.start[1] > last_end:
            pieces.append(" ")
        pieces.append(token.string)
        last_end = token.end[1]
    return "".join(pieces)


@dataclasses.dataclass
class Program:
    seed: int
    mode: str
    inputs: list[InputSpec]
    statements: list[Statement]
    outputs: list[str]
    expects_error: bool = False   # the generator kept a last statement that raises in eager
    single_output: bool = False   # `return v` instead of `return (v,)`

    def renamed(self, mapping: dict[str, str]) -> "Program":
        inputs = [dataclasses.replace(spec, name=mapping.get(spec.name, spec.name)) for spec in self.inputs]
        return dataclasses.replace(self, inputs=inputs,
                                   statements=[statement.renamed(mapping) for statement in self.statements],
                                   outputs=[mapping.get(name, name) for name in self.outputs])

    def used_names(self) -> set[str]:
        names = set(self.outputs)
        for statement in self.statements:
            names.update(statement.uses)
            names.update(statement.mutates)
        return names

    def tidy(self, keep_inputs: int = 0) -> "Program":
        """Unused inputs dropped (beyond the first `keep_inputs`), names numbered in order."""
        used = self.used_names()
        inputs = [spec for position, spec in enumerate(self.inputs)
                  if spec.name in used or (position < keep_inputs and not spec.is_index)]
        program = dataclasses.replace(self, inputs=inputs)
        mapping = {}
        data = [spec for spec in inputs if not spec.is_index]
        index = [spec for spec in inputs if spec.is_index]
        for position, spec in enumerate(data):
            mapping[spec.name] = "abcdefghjkmnpqrstuwxyz"[position] if position < 22 else f"t{position}"
        for position, spec in enumerate(index):
            mapping[spec.name] = f"i{position}"
        defined = [name for statement in self.statements for name in statement.defs]
        for position, name in enumerate(defined):
            mapping[name] = f"v{position}"
        return program.renamed(mapping)

    def live_only(self) -> "Program":
        """The statements the outputs depend on, and the writes in place into inputs or into
        memory something later kept reads (with what they read): what a compiler that drops
        unused code still runs.  A view shares its base's memory (`view_of`, transitively)."""
        root = {spec.name: spec.name for spec in self.inputs}
        for statement in self.statements:
            for name in statement.defs:
                root[name] = root.get(statement.view_of, statement.view_of) if statement.view_of else name
        inputs = set(self.input_names())
        live = set(self.outputs)
        kept = []
        for statement in reversed(self.statements):
            live_memory = {root.get(name, name) for name in live}
            writes_live = any(root.get(name, name) in inputs or root.get(name, name) in live_memory
                              for name in statement.mutates)
            if writes_live or any(name in live for name in statement.defs):
                kept.append(statement)
                live.update(statement.uses)
                live.update(statement.mutates)
                if statement.view_of:
                    live.add(statement.view_of)
        return dataclasses.replace(self, statements=list(reversed(kept)))

    def input_names(self) -> list[str]:
        return [spec.name for spec in self.inputs]

    def ops(self) -> list[str]:
        return sorted({statement.op for statement in self.statements})

    def program_source(self) -> str:
        lines = [f"def program({', '.join(self.input_names())}):"]
        lines.extend("    " + statement.text for statement in self.statements)
        if self.single_output and len(self.outputs) == 1:
            lines.append(f"    return {self.outputs[0]}")
        else:
            lines.append(f"    return ({', '.join(self.outputs)}{',' if len(self.outputs) == 1 else ''})")
        return "\n".join(lines)

    def source(self, main_backend: str | None = None) -> str:
        text = (f"# fuzz program: seed {self.seed}, mode {self.mode}\n{HEADER}\n\n"
                f"{render_make_inputs(self.inputs)}\n\n\n{self.program_source()}\n")
        if main_backend:
            text += MAIN.format(backend=main_backend)
        return text

    def statement_at_line(self, line: int) -> Statement | None:
        """The statement on this (1-based) line of source()."""
        lines = self.source().splitlines()
        start = next(i for i, text in enumerate(lines) if text.startswith("def program("))
        position = line - 1 - (start + 1)
        return self.statements[position] if 0 <= position < len(self.statements) else None

    def flags(self) -> dict[str, tuple[bool, bool]]:
        """Per name: (carries rounding noise, may jump with noise), after the whole program ran."""
        noisy: dict[str, bool] = {name: False for name in self.input_names()}
        fragile: dict[str, bool] = dict(noisy)
        root: dict[str, str] = {name: name for name in self.input_names()}
        for statement in self.statements:
            used_noise = any(noisy.get(name, False) for name in statement.uses)
            used_fragile = any(fragile.get(name, False) for name in statement.uses)
            for index, name in enumerate(statement.defs):
                rounds = statement.rounds[index] if index < len(statement.rounds) else True
                jumps = statement.jumps[index] if index < len(statement.jumps) else False
                noisy[name] = rounds or used_noise
                fragile[name] = used_fragile or (jumps and used_noise)
                root[name] = root.get(statement.view_of, name) if statement.view_of else name
            for target in statement.mutates:
                # A write through a view changes everything sharing the storage.
                group = root.get(target, target)
                any_round = any(statement.rounds) if statement.rounds else True
                for name in list(noisy):
                    if root.get(name, name) == group:
                        noisy[name] = noisy[name] or used_noise or any_round
                        fragile[name] = fragile[name] or used_fragile or (any(statement.jumps) and used_noise)
        return {name: (noisy[name], fragile[name]) for name in noisy}

    def run_statements(self, count: int | None = None) -> dict:
        """The names bound after building the inputs and running the first `count` statements
        (all by default) eagerly, one at a time."""
        namespace = {"torch": torch, "F": torch.nn.functional, "gen": lambda s: torch.Generator().manual_seed(s),
                     "DEVICE": "cpu"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for spec in self.inputs:
                exec("\n".join(render_input(spec)[0]), namespace)
            for statement in self.statements[:count]:
                exec(statement.text, namespace)
        return namespace

    def any_fragile(self) -> bool:
        return any(fragile for _, fragile in self.flags().values())
