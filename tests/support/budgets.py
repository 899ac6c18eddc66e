"""Reading the profiles with an A/B budget of their own out of prose (help text, README)."""

from __future__ import annotations

import re

from pytest_llmperf.measure.profiles import builtin_profiles


def own_budgets() -> dict[str, int]:
    """``{profile: embedded_ab_budget}`` for the built-in profiles that set one."""
    profiles = builtin_profiles().items()
    return {name: p.embedded_ab_budget for name, p in profiles if p.embedded_ab_budget is not None}


def named_budgets(text: str) -> dict[str, int]:
    """``{profile: budget}`` from prose such as "40 for `long` and `sharegpt-bs4`)"."""
    found = re.search(r"(\d+) for ([\w`, -]+?)\)", text)
    assert found is not None, f"no 'N for PROFILE and PROFILE)' in: {text}"
    names = re.split(r", | and ", found[2].replace("`", ""))
    return {name: int(found[1]) for name in names}
