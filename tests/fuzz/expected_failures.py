"""Known fuzz failures of the fixed slice in test_fuzz_slice.py, keyed by (backend, mode, seed),
each with the reason: the failure class in /work/notes/fuzz_findings.md and what goes wrong.
Remove an entry when its bug is fixed: the test fails on a listed failure that passes."""

EXPECTED: dict[tuple[str, str, int], str] = {
}

# Entries whose failure comes and goes between runs (uninitialised memory): passing is no error.
FLAKY: set[tuple[str, str, int]] = set()
