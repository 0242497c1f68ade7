"""Where a benchmark writes its tables: the folder given by `--out DIR`.

Without `--out`, tables go to ./ember-bench-results in the current directory, never into the
source tree: the committed tables in benchmarks/results/ change only when asked for, with
`--out benchmarks/results`.  `ember bench --out DIR` passes its folder on to every script.
"""
from __future__ import annotations

import os
import sys

DEFAULT_FOLDER = "ember-bench-results"


def take_out_option(argv: list[str] | None = None) -> str:
    """Removes `--out DIR` (or `--out=DIR`) from argv (sys.argv by default) and returns the folder,
    made absolute and created; the default is ./ember-bench-results."""
    argv = sys.argv if argv is None else argv
    folder = DEFAULT_FOLDER
    for index, item in enumerate(argv):
        if item == "--out":
            if index + 1 >= len(argv):
                raise SystemExit("--out needs a folder: --out DIR")
            folder = argv[index + 1]
            del argv[index:index + 2]
            break
        if item.startswith("--out="):
            folder = item[len("--out="):]
            del argv[index]
            break
    folder = os.path.abspath(os.path.expanduser(folder))
    os.makedirs(folder, exist_ok=True)
    return folder


def write_table(folder: str, filename: str, text: str) -> None:
    """Prints a benchmark's table and writes it to folder/filename."""
    print(text)
    with open(os.path.join(folder, filename), "w") as handle:
        handle.write(text)
