"""Summaries of fuzz outcomes: counts per class and check, failures grouped by signature, with the
minimized repro of each group (plain text for the terminal, markdown for --report)."""
from __future__ import annotations

import collections
import re

from .harness import CLASSES, normalize_message

ALL_CLASSES = CLASSES + ("generator_error",)
EXAMPLE_SEEDS = 12


def coarse_signature(row: dict) -> str:
    """Class, check and exception, and the culprit statement's op where localize.py found one."""
    at = f" | at {row['culprit']}" if row.get("culprit") else ""
    if row["cls"] == "crash":
        return f"crash | {row.get('check') or ''} | {normalize_message(row.get('exception') or '')}{at}"
    if row["cls"] == "wrong":
        return f"wrong | {row.get('check')}{at}"
    if row["cls"] == "generator_error":
        return f"generator_error | {normalize_message(row.get('detail') or '')}"
    return row["cls"]


def _class_table(rows: list[dict]) -> list[list]:
    counts = collections.Counter((row["backend"], row["cls"]) for row in rows)
    backends = sorted({row["backend"] for row in rows})
    table = []
    for backend in backends:
        mismatched = sum(1 for row in rows if row["backend"] == backend and row["cls"] == "eager_error"
                         and row.get("type_match") is False)
        line = [backend, sum(counts[(backend, cls)] for cls in ALL_CLASSES)]
        line += [counts[(backend, cls)] for cls in ALL_CLASSES]
        line.append(mismatched)
        table.append(line)
    return table


def _groups(rows: list[dict]) -> dict:
    groups: dict = collections.defaultdict(list)
    for row in rows:
        if row["cls"] in ("ok", "eager_error", "eager_wrong", "flaky_eager", "ill_conditioned"):
            continue
        groups[(row["backend"], coarse_signature(row))].append(row)
    return dict(sorted(groups.items(), key=lambda item: (item[0][0], -len(item[1]))))


def _minimized_for(group_rows: list[dict], minimized: list[dict]) -> list[dict]:
    keys = {(row["mode"], row["seed"], row["backend"]) for row in group_rows}
    return [entry for entry in minimized if (entry["mode"], entry["seed"], entry["backend"]) in keys]


def _seeds(rows: list[dict]) -> str:
    by_mode = collections.defaultdict(list)
    for row in rows:
        by_mode[row["mode"]].append(row["seed"])
    parts = []
    for mode, seeds in by_mode.items():
        shown = ", ".join(map(str, sorted(seeds)[:EXAMPLE_SEEDS]))
        more = f" (+{len(seeds) - EXAMPLE_SEEDS} more)" if len(seeds) > EXAMPLE_SEEDS else ""
        parts.append(f"{mode}: {shown}{more}")
    return "; ".join(parts)


def _program_part(source: str) -> str:
    """The source without the standard header and __main__ block (for the terminal)."""
    body = source.split("\n\n\ndef make_inputs", 1)[-1]
    body = "def make_inputs" + body if not body.startswith("def make_inputs") else body
    return re.split(r"\n\n\nif __name__", body)[0].strip()


def summarize(rows: list[dict], minimized: list[dict]) -> str:
    lines = []
    modes = sorted({row["mode"] for row in rows})
    programs = len({(row["mode"], row["seed"]) for row in rows})
    lines.append(f"{programs} programs (modes: {', '.join(modes)})")
    header = ["backend", "runs"] + list(ALL_CLASSES) + ["eager_error type differs"]
    lines.append("  ".join(f"{h:>12}" for h in header))
    for line in _class_table(rows):
        lines.append("  ".join(f"{str(v):>12}" for v in line))
    if len(modes) > 1:  # every mode's outcome, not only the total's
        for mode in modes:
            for line in _class_table([row for row in rows if row["mode"] == mode]):
                lines.append("  ".join(f"{str(v):>12}" for v in [f"{line[0]}:{mode}", *line[1:]]))
    checks = collections.Counter((row["backend"], row["cls"], row.get("check") or "")
                                 for row in rows if row["cls"] in ("wrong", "crash"))
    if checks:
        lines.append("checks:")
        for (backend, cls, check), count in sorted(checks.items()):
            lines.append(f"  {backend:>10} {cls:>6} {check:<28} {count}")
    for (backend, signature), group_rows in _groups(rows).items():
        lines.append(f"\n[{backend}] {signature}: {len(group_rows)} programs; seeds {_seeds(group_rows)}")
        first = group_rows[0]
        lines.append(f"    e.g. seed {first['seed']}: {first.get('exception') or first.get('detail', '')}"[:300])
        for entry in _minimized_for(group_rows, minimized):
            outcome = entry["outcome"]
            lines.append(f"    minimized seed {entry['seed']} ({entry['mode']}), ops {', '.join(entry['ops'])}: "
                         f"{outcome.get('exception') or outcome.get('detail', '')}"[:300])
            lines.extend("      " + text for text in _program_part(entry["source"]).splitlines())
    return "\n".join(lines)


def write_report(path: str, rows: list[dict], minimized: list[dict], command: str) -> None:
    out = [f"# ember fuzz report\n", f"`python3 -m tests.fuzz.run {command}`\n"]
    modes = sorted({row["mode"] for row in rows})
    programs = len({(row["mode"], row["seed"]) for row in rows})
    out.append(f"{programs} programs, modes: {', '.join(modes)}\n")
    header = ["backend", "runs"] + list(ALL_CLASSES) + ["eager_error type differs"]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    for line in _class_table(rows):
        out.append("| " + " | ".join(map(str, line)) + " |")
    out.append("\n## Failure groups\n")
    for (backend, signature), group_rows in _groups(rows).items():
        out.append(f"### [{backend}] {signature}\n")
        out.append(f"{len(group_rows)} programs; seeds {_seeds(group_rows)}\n")
        first = group_rows[0]
        out.append(f"Example (seed {first['seed']}, {first['mode']}): `{first.get('exception') or first.get('detail')}`\n")
        for entry in _minimized_for(group_rows, minimized):
            outcome = entry["outcome"]
            out.append(f"Minimized from seed {entry['seed']} ({entry['mode']}), ops: {', '.join(entry['ops'])}; "
                       f"{outcome.get('where') or ''} {outcome.get('exception') or outcome.get('detail', '')}\n")
            out.append("```python\n" + entry["source"].rstrip() + "\n```\n")
    with open(path, "w") as handle:
        handle.write("\n".join(out) + "\n")
