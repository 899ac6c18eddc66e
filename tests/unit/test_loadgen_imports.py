"""The load generator's rooms keep to their imports (ARCHITECTURE.md): no numpy, no pytest."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["pytest_llmperf.measure.loadgen", "pytest_llmperf.measure.sse"])
def test_no_numpy_pytest_or_aiohttp(module: str) -> None:
    check = (
        f"import sys, {module}; "
        "bad = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'numpy', 'pytest', '_pytest', 'aiohttp', 'yaml'}); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", check], check=True)


def test_sse_parser_needs_nothing_beyond_the_stdlib() -> None:
    check = "import sys, pytest_llmperf.measure.sse; assert 'httpx' not in sys.modules"
    subprocess.run([sys.executable, "-c", check], check=True)
