"""The sweep's step search (measure.sweep): growth, bisection, budget, explicit lists."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure.sweep import SweepSearch, SweepSpec


def drive(spec: SweepSpec, past: Callable[[float], bool]) -> SweepSearch:
    search = SweepSearch(spec)
    while (load := search.next_load()) is not None:
        search.record(load, past(load))
    return search


def test_rate_search_grows_then_bisects_to_the_resolution() -> None:
    spec = SweepSpec("request_rate", start=1.0, factor=2.0, max_steps=30, resolution=0.02)
    search = drive(spec, lambda load: load > 11.3)
    loads = [load for load, _ in search.steps]
    assert loads[:5] == [1.0, 2.0, 4.0, 8.0, 16.0]  # geometric up to the first step past
    assert search.within is not None
    assert search.lowest_past is not None
    assert search.within <= 11.3 < search.lowest_past
    assert (search.lowest_past - search.within) / search.within <= 0.02
    assert len(loads) < 30  # it stopped on resolution, not on the budget


@pytest.mark.parametrize("budget", [1, 3, 6])
def test_the_step_budget_is_never_exceeded(budget: int) -> None:
    spec = SweepSpec("request_rate", start=1.0, max_steps=budget, resolution=1e-6)
    search = drive(spec, lambda load: load > 5.0)
    assert len(search.steps) == budget


def test_concurrency_search_ends_on_adjacent_whole_numbers() -> None:
    spec = SweepSpec("max_concurrency", start=1, factor=2.0, max_steps=20)
    search = drive(spec, lambda load: load > 13)
    loads = [load for load, _ in search.steps]
    assert all(load == int(load) for load in loads)
    assert (search.within, search.lowest_past) == (13.0, 14.0)
    assert len(loads) == len(set(loads))  # no load measured twice


def test_a_first_step_past_the_boundary_shrinks_the_load() -> None:
    spec = SweepSpec("request_rate", start=16.0, factor=2.0, max_steps=20, resolution=0.05)
    search = drive(spec, lambda load: load > 3.0)
    assert [load for load, _ in search.steps][:4] == [16.0, 8.0, 4.0, 2.0]
    assert search.within is not None
    assert search.within <= 3.0 < (search.lowest_past or 0)


def test_shrinking_stops_at_min_load() -> None:
    spec = SweepSpec("request_rate", start=16.0, max_steps=20, min_load=3.0)
    search = drive(spec, lambda load: True)
    assert [load for load, _ in search.steps] == [16.0, 8.0, 4.0, 3.0]
    assert search.within is None


def test_concurrency_one_already_past_ends_the_search() -> None:
    search = drive(SweepSpec("max_concurrency", start=1, max_steps=10), lambda load: True)
    assert search.steps == [(1.0, True)]


def test_growth_stops_at_max_load() -> None:
    spec = SweepSpec("request_rate", start=1.0, max_steps=50, max_load=10.0)
    search = drive(spec, lambda load: False)
    assert [load for load, _ in search.steps] == [1.0, 2.0, 4.0, 8.0, 10.0]


def test_explicit_loads_are_measured_in_order_within_the_budget() -> None:
    search = drive(SweepSpec("request_rate", loads=(4.0, 1.0, 2.0)), lambda load: load > 1)
    assert search.steps == [(1.0, False), (2.0, True), (4.0, True)]
    capped = drive(SweepSpec("request_rate", loads=(1.0, 2.0, 4.0), max_steps=2), lambda _: False)
    assert len(capped.steps) == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"axis": "users"}, "axis must be one of request_rate, max_concurrency"),
        ({"axis": "request_rate", "factor": 1.0}, "factor must be > 1"),
        ({"axis": "request_rate", "max_steps": 0}, "max_steps must be >= 1"),
        ({"axis": "max_concurrency", "loads": (1.5,)}, "whole numbers"),
        ({"axis": "request_rate", "loads": (0.0,)}, "positive finite"),
        ({"axis": "max_concurrency", "start": 2.5}, "whole number"),
        ({"axis": "request_rate", "start": 2.0, "min_load": 4.0}, "min_load 4.0 must be in"),
    ],
)
def test_bad_specs_are_refused_naming_the_setting(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SweepSpec(**options)  # type: ignore[arg-type]
