"""--llmperf-ab on the embedded default: the plugin starts two real vLLM servers (A as
configured, B with --max-num-seqs 1, an engine argument with a known, large cost on a
profile of concurrent requests), alternates them and finds B regressed; both are gone after.
"""

from __future__ import annotations

import json
import re
import socket

import pytest

from tests.conftest import requires_vllm

pytestmark = [pytest.mark.e2e, requires_vllm]


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_serial_candidate_regressed_against_the_embedded_default(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_suite="def test_serving(llmperf):\n    llmperf.check()\n")
    result = pytester.runpytest_subprocess(
        "--engine=vllm",
        "--llmperf-ab-candidate-args=--max-num-seqs 1",
        "--llmperf-profile=short",
        "--num-prompts=32",
        "--llmperf-warmups=4",
        "--llmperf-ab-budget=8",
        "--llmperf-json=out.json",
        "-p",
        "no:cacheprovider",
        timeout=1200,
    )
    result.assert_outcomes(failed=1)
    (record,) = json.loads(pytester.path.joinpath("out.json").read_text())["results"]
    assert record["outcome"] == "regressed"
    ab = record["ab"]
    assert ab["reference"] == "vllm"
    assert ab["candidate"] == "candidate"
    assert ab["order"].startswith("ABBAABBAABBA")
    assert "--max-num-seqs 1" in ab["candidate_command"]
    assert "--max-num-seqs" not in ab["reference_command"]
    assert ab["metrics"]["total_token_throughput"]["verdict"] == "regressed"
    # Both servers were stopped at the end of the session.
    for command in (ab["candidate_command"], ab["reference_command"]):
        port = int(re.search(r"--port (\d+)", command).group(1))  # type: ignore[union-attr]
        assert not _listening(port), command
