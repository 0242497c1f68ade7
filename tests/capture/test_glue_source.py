"""Glue source: text pasted into it is sanitized, it is logged before it is compiled, and
tracebacks through it show the user's file, line and source text."""
import logging
import traceback

import pytest
import torch

import ember
from ember.capture import convert_frame
from ember.capture.source_text import comment, keyword_arguments

BACKENDS = ["eager", "aot_eager"]


def _raises_multiline(x, flag):
    y = x + 1
    if flag:
        raise ValueError("first line\nsecond line)\x00")
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_reason_with_newline_does_not_break_the_glue(backend):
    ember.reset()
    compiled = ember.compile(_raises_multiline, backend=backend)
    x = torch.randn(3)
    with ember.config.patch(raise_capture_errors=True):
        with pytest.raises(ValueError) as eager_error:
            _raises_multiline(x, True)
        with pytest.raises(ValueError) as compiled_error:
            compiled(x, True)
        assert str(compiled_error.value) == str(eager_error.value)
        torch.testing.assert_close(compiled(x, False), _raises_multiline(x, False))


def test_comment_text_is_one_printable_line():
    text = comment("a\nb\r\nc\x00d\u2028e\ud800")
    assert "\n" not in text and "\r" not in text and "\x00" not in text
    compile(f"# {text}\nx = 1\n", "<test>", "exec")  # neither a syntax nor an encoding error
    assert keyword_arguments([("ok", "1"), ("not ok", "2")]) == ["ok=1", "**{'not ok': 2}"]


def _breaks_and_returns(x):
    y = x * 2
    print("graph break")
    return y + 1


def test_glue_is_logged_before_it_is_compiled(monkeypatch, caplog, capsys):
    def fail(*args, **kwargs):
        raise SyntaxError("glue failed to compile")

    ember.reset()
    monkeypatch.setattr(convert_frame, "compile_as_user_code", fail)
    logger = logging.getLogger("ember.bytecode")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG, logger="ember.bytecode"):
            with ember.config.patch(raise_capture_errors=True), pytest.raises(SyntaxError):
                ember.compile(_breaks_and_returns, backend="eager")(torch.randn(2))
    finally:
        logger.setLevel(level)
    glue_logs = [record.getMessage() for record in caplog.records if "glue for" in record.getMessage()]
    assert glue_logs and "def __ember_glue(" in glue_logs[0]


def _helper_that_raises(value):
    raise KeyError("from the helper")


def _calls_helper_after_break(x):
    y = x * 3
    _helper_that_raises(y)
    return y


def _raises_itself(x, limit):
    y = x - 1
    if y.sum() > limit:
        raise RuntimeError("over the limit")
    return y


def _line_of(function, text):
    import inspect

    lines, start = inspect.getsourcelines(function)
    return start + next(index for index, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("backend", BACKENDS)
def test_traceback_shows_the_users_lines(backend):
    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        with pytest.raises(KeyError) as error:
            ember.compile(_calls_helper_after_break, backend=backend)(torch.randn(2))
    frames = traceback.extract_tb(error.value.__traceback__)
    assert frames[-1].filename == __file__
    assert frames[-1].lineno == _line_of(_helper_that_raises, 'raise KeyError')
    assert frames[-1].line == 'raise KeyError("from the helper")'
    caller = frames[-2] if frames[-2].filename == __file__ else \
        next(frame for frame in reversed(frames[:-1]) if frame.filename == __file__)
    assert caller.name == "_calls_helper_after_break"
    assert caller.lineno == _line_of(_calls_helper_after_break, "_helper_that_raises(y)")
    assert caller.line == "_helper_that_raises(y)"
    assert not any("ember glue" in frame.filename for frame in frames)

    ember.reset()
    with ember.config.patch(raise_capture_errors=True):
        with pytest.raises(RuntimeError) as error:
            ember.compile(_raises_itself, backend=backend)(torch.ones(3), -1.0)
    last = traceback.extract_tb(error.value.__traceback__)[-1]
    assert (last.filename, last.name, last.line) == (__file__, "_raises_itself", 'raise RuntimeError("over the limit")')
    assert last.lineno == _line_of(_raises_itself, "raise RuntimeError")


def _reads_odd_keys(x, table):
    return x * table[torch.float32] + table[float("inf")] + table[(1, None)]


def test_keys_without_a_literal_are_referenced_not_printed():
    # `torch.float32` and `inf` print as names the guard and glue code do not have: every
    # guard check failed and each call recompiled.
    ember.reset()
    compiled = ember.compile(_reads_odd_keys, backend="eager")
    with ember.config.patch(raise_capture_errors=True):
        for _ in range(3):
            table = {torch.float32: 2.0, float("inf"): 1.0, (1, None): 0.5}
            torch.testing.assert_close(compiled(torch.ones(2), table), _reads_odd_keys(torch.ones(2), table))
    assert ember.counters["stats"]["recompiles"] == 0
