"""The command line that records a profile's numbers, derived from the one that ran."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_llmperf import redact

_UPDATE = ("--update-baselines", "--llmperf-update-baselines")
_PROFILE = ("--llmperf-profile", "--profile")


def accept_command(invocation: Sequence[str], profile: str) -> str:
    """The same options, this profile only, ``--update-baselines`` once, secrets masked: what a
    person pastes to accept the numbers a failure reported."""
    kept: list[str] = []
    skip_value = False
    for arg in invocation:
        if skip_value:
            skip_value = False
            continue
        if arg in _UPDATE or arg.startswith(tuple(f"{name}=" for name in _PROFILE)):
            continue
        if arg in _PROFILE:
            skip_value = True  # its value is the next argument
            continue
        kept.append(arg)
    return redact.command(["pytest", *kept, "--llmperf-profile", profile, "--update-baselines"])
