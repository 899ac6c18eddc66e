"""Running pytest with bad plugin options: the run must stop as a usage error with the text."""

from __future__ import annotations

import pytest


def assert_usage_error(pytester: pytest.Pytester, args: list[str], expected: str) -> None:
    """``args`` stop the run before any test, with ``expected`` (a glob) on stderr."""
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
