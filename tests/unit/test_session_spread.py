"""The between-session spread read from the history file (gate/session_spread.py)."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from pytest_llmperf.gate import session_spread
from pytest_llmperf.gate.session_spread import MIN_SESSIONS, SESSIONS_USED, Series

SERIES = Series(
    machine="cpu-amx-2c",
    engine="vllm",
    variant="vllm",
    model="tiny-qwen3",
    profile="long",
    num_prompts=16,
)
THROUGHPUT = "total_token_throughput"


def _line(session: int, value: float, **changed: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "timestamp": f"2026-11-{session + 1:02d}T03:00:00+00:00",
        "machine": SERIES.machine,
        "engine": SERIES.engine,
        "variant": SERIES.variant,
        "model": SERIES.model,
        "profile": SERIES.profile,
        "num_prompts": SERIES.num_prompts,
        "outcome": "pass",
        "metrics": {THROUGHPUT: value, "mean_tpot_ms": 10.0},
    }
    line.update(changed)
    return line


# Eight sessions, log-spread about 5 %.
VALUES = [1000.0, 1050.0, 960.0, 1020.0, 940.0, 1070.0, 990.0, 1010.0]


def test_the_spread_is_the_robust_sd_of_the_sessions_logs() -> None:
    spread = session_spread.session_spread([_line(i, v) for i, v in enumerate(VALUES)], SERIES)
    assert spread[THROUGHPUT].sessions == len(VALUES)
    assert spread[THROUGHPUT].sd == pytest.approx(session_spread.robust_log_sd(VALUES))
    assert 0.02 < spread[THROUGHPUT].sd < 0.08
    assert spread["mean_tpot_ms"].sd == 0.0  # the same every session


def test_only_lines_of_the_same_configuration_profile_and_machine_count() -> None:
    ours = [_line(i, v) for i, v in enumerate(VALUES)]
    others = [
        _line(20 + i, 100.0 * (i + 1), **{key: value})
        for i, (key, value) in enumerate(
            [
                ("machine", "gpu-a100"),
                ("engine", "sglang"),
                ("variant", "fast"),
                ("model", "other"),
                ("profile", "short"),
                ("num_prompts", 64),
            ]
        )
    ]
    assert session_spread.session_spread(ours + others, SERIES) == session_spread.session_spread(
        ours, SERIES
    )


def test_too_few_sessions_give_no_spread() -> None:
    lines = [_line(i, v) for i, v in enumerate(VALUES[: MIN_SESSIONS - 1])]
    assert session_spread.session_spread(lines, SERIES) == {}


def test_a_session_that_measured_twice_counts_once_with_its_last_line() -> None:
    lines = [_line(i, v) for i, v in enumerate(VALUES[: MIN_SESSIONS - 1])]
    lines.append(_line(0, 5000.0))  # session 0 again: replaces its first line
    assert session_spread.session_spread(lines, SERIES) == {}
    lines.append(_line(9, 1000.0))
    spread = session_spread.session_spread(lines, SERIES)[THROUGHPUT]
    assert spread.sessions == MIN_SESSIONS
    assert spread.sd == pytest.approx(
        session_spread.robust_log_sd([5000.0, *VALUES[1 : MIN_SESSIONS - 1], 1000.0])
    )


def test_only_the_most_recent_sessions_are_used() -> None:
    # Twenty wild old sessions, then steady recent ones: the machine as it is now.
    old = [_line(i, 100.0 * (1 + i % 7)) for i in range(20)]
    recent = [_line(40 + i, 1000.0) for i in range(SESSIONS_USED)]
    spread = session_spread.session_spread(old + recent, SERIES)[THROUGHPUT]
    assert (spread.sd, spread.sessions) == (0.0, SESSIONS_USED)


def test_one_real_regression_among_the_sessions_moves_the_spread_little() -> None:
    lines = [_line(i, v) for i, v in enumerate(VALUES)]
    lines.append(_line(30, 500.0, outcome="regressed"))
    robust = session_spread.session_spread(lines, SERIES)[THROUGHPUT].sd
    plain = statistics.stdev(math.log(v) for v in [*VALUES, 500.0])
    assert robust < 0.08 < plain


def test_missing_and_unusable_values_are_skipped() -> None:
    lines = [_line(i, v) for i, v in enumerate(VALUES[:MIN_SESSIONS])]
    lines[0]["metrics"][THROUGHPUT] = 0.0
    lines[1]["metrics"].pop(THROUGHPUT)
    lines[2]["metrics"][THROUGHPUT] = True
    spread = session_spread.session_spread(lines, SERIES)
    assert THROUGHPUT not in spread  # two left: too few
    assert spread["mean_tpot_ms"].sessions == MIN_SESSIONS


def test_a_baseline_far_from_the_sessions_median_is_pointed_out() -> None:
    spread = session_spread.session_spread([_line(i, v) for i, v in enumerate(VALUES)], SERIES)
    throughput = spread[THROUGHPUT]
    assert throughput.center == pytest.approx(statistics.median(VALUES))
    assert throughput.baseline_off(1000.0) is None  # inside the sessions' spread
    # Recorded 25 % faster than the nights since (the case measured in docs/noise.md).
    off = throughput.baseline_off(1.25 * statistics.median(VALUES))
    assert off == pytest.approx(25.0)
    assert throughput.baseline_off(0.75 * statistics.median(VALUES)) == pytest.approx(-25.0)
