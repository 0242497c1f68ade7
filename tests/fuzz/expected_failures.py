"""Known fuzz failures of the fixed slice in test_fuzz_slice.py, keyed by (backend, mode, seed),
each with the reason: the failure class in /work/notes/fuzz_findings.md and what goes wrong.
Remove an entry when its bug is fixed: the test fails on a listed failure that passes."""

EXPECTED: dict[tuple[str, str, int], str] = {
    ("aot_eager", "default", 18): "F4: writing an expanded input back with copy_ after `d[0, 0, None] += True` "
                                  "(eager allows the one-element write) raises 'more than one element ... refers "
                                  "to a single memory location'",
    ("ember", "default", 5): "F1: F.softmax(a, dim=-2, dtype=torch.float32) over a leading dim reads before writing",
    ("ember", "default", 18): "F4: as aot_eager seed 18 (expanded input written back with copy_)",
    ("ember", "default", 21): "F2: integer pow with negative exponents (eager: 0 for |base| > 1, ember INT_MIN)",
    ("ember", "default", 23): "F3: uint8 floor() is emitted as a double: ember_minimum(int, double) does not compile",
    ("ember", "default", 36): "F1: F.softmax(c, dim=0) over a leading dim reads before writing",
}

# Entries whose failure comes and goes between runs (uninitialised memory): passing is no error.
FLAKY: set[tuple[str, str, int]] = {("ember", "default", 5), ("ember", "default", 36)}
