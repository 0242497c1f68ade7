"""The fuzz summary reports every mode it was given (a GPU run's summary once showed one mode of
five and hid eleven wrong results)."""
from tests.fuzz.report import summarize


def _row(mode, cls, seed):
    return {"mode": mode, "backend": "ember", "cls": cls, "seed": seed, "check": "values" if cls == "wrong" else ""}


def test_summary_has_a_row_per_mode_with_its_wrong_count():
    rows = [_row("default", "ok", 1), _row("lowp", "wrong", 2), _row("lowp", "ok", 3), _row("inplace", "wrong", 4)]
    text = summarize(rows, [])
    table = text.split("checks:")[0]
    lines = {line.split()[0]: line.split() for line in table.splitlines() if line.strip().startswith("ember")}
    assert lines["ember"][1:4] == ["4", "2", "2"]  # runs, ok, wrong
    assert lines["ember:lowp"][1:4] == ["2", "1", "1"]
    assert lines["ember:inplace"][1:4] == ["1", "0", "1"]
    assert lines["ember:default"][1:4] == ["1", "1", "0"]
