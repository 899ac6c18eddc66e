"""How many pairs an A/B comparison may take: the option, else the profile's own budget on
the embedded default, else 20 (``measure.run.ab_budget``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.config import AB_BUDGET, Settings
from pytest_llmperf.errors import ProfileError
from pytest_llmperf.measure.profiles import builtin_profiles, parse_profiles
from pytest_llmperf.measure.run import ab_budget
from tests.support.budgets import named_budgets, own_budgets

WIDE = builtin_profiles()["sharegpt-bs4"]  # needs more pairs on 2 cores (docs/noise.md)
NARROW = builtin_profiles()["medium"]
# The profiles whose budget on 2 cores was measured to need more than the default.
MEASURED_WIDER = {"sharegpt-bs4": 40, "long": 40, "sharegpt": 40}
README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_shipped_profiles_ask_for_more_pairs_only_where_measured() -> None:
    assert AB_BUDGET == 20
    assert own_budgets() == MEASURED_WIDER


@pytest.mark.parametrize(
    ("profile", "settings", "embedded", "expected"),
    [
        (WIDE, Settings(), True, 40),  # the embedded default at its own scale
        (NARROW, Settings(), True, AB_BUDGET),
        (WIDE, Settings(), False, AB_BUDGET),  # a real model: its spread was never measured
        (WIDE, Settings(num_prompts=64), True, AB_BUDGET),  # another scale, another spread
        (WIDE, Settings(ab_budget=12), True, 12),  # --llmperf-ab-budget wins everywhere
        (NARROW, Settings(ab_budget=60), False, 60),
    ],
    ids=["own", "profile-without", "not-embedded", "other-scale", "option", "option-real"],
)
def test_the_budget_comes_from_the_option_else_the_profile_else_the_default(
    profile: object, settings: Settings, embedded: bool, expected: int
) -> None:
    assert ab_budget(profile, settings, embedded=embedded) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -3, "forty", 2.5])
def test_a_bad_embedded_budget_names_the_file_the_profile_and_the_key(value: object) -> None:
    text = (
        "profiles:\n  mine:\n    dataset: random\n    num_prompts: 8\n    input_len: 8\n"
        f"    output_len: 2\n    embedded_ab_budget: {value}\n"
    )
    with pytest.raises(ProfileError, match="embedded_ab_budget") as info:
        parse_profiles(text, "my.yaml")
    assert "my.yaml: profile 'mine'" in str(info.value)


def test_an_own_profile_may_set_it() -> None:
    text = (
        "profiles:\n  mine:\n    dataset: random\n    num_prompts: 8\n    input_len: 8\n"
        "    output_len: 2\n    embedded_ab_budget: 30\n"
    )
    mine = parse_profiles(text, "my.yaml")["mine"]
    assert ab_budget(mine, Settings(), embedded=True) == 30
    # The budget is how it is compared, not what is measured: the identity keeps it out.
    assert "embedded_ab_budget" not in str(mine.workload())


def test_the_readme_names_the_profiles_with_a_budget_of_their_own() -> None:
    # The options table restates profiles.yaml by hand; this keeps the two in step.
    lines = README.read_text("utf-8").splitlines()
    (row,) = [line for line in lines if line.startswith("| `--llmperf-ab-budget")]
    assert named_budgets(row) == MEASURED_WIDER
