"""Dry run: say exactly what the plugin would start, without starting anything.

The text is meant to be copied: the command line is shell-quoted, the environment variables are
those the plugin adds to the inherited environment, and generated files are shown verbatim.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from pytest_llmperf import redact
from pytest_llmperf.engines.base import EngineSpec, LaunchPlan, LaunchRequest


def command_line(argv: Sequence[str]) -> str:
    """The argv as one line a POSIX shell would split back into the same argv, with the
    values of secret-bearing options masked (the line is printed, the engine gets the argv)."""
    return redact.command(argv)


def _shown(name: str, value: str) -> str:
    return redact.MASK if redact.is_secret_name(name) else redact.text(value)


def describe_plan(spec: EngineSpec, plan: LaunchPlan) -> str:
    lines = [f"engine: {spec.name} ({spec.display_name})"]
    if not spec.starts_server:
        lines.append(f"command: (none: the plugin starts nothing and uses {plan.base_url})")
    else:
        lines.append(f"command: {command_line(plan.argv)}")
    if plan.env:
        lines.append("environment added by the plugin:")
        env = sorted(plan.env.items())
        lines += [f"  {name}={shlex.quote(_shown(name, value))}" for name, value in env]
    else:
        lines.append("environment added by the plugin: (none)")
    for folder in plan.directories:
        lines.append(f"folder created before the start: {folder}")
    for path, content in plan.files.items():
        lines.append(f"file written before the start: {path}")
        lines.append(f"----- begin {path.name} -----")
        lines.append(redact.text(content.rstrip("\n")))
        lines.append(f"----- end {path.name} -----")
    lines.append(f"API: {redact.url(plan.base_url)}/v1")
    lines.append(f"ready when: GET {plan.health_url} answers 200")
    return "\n".join(lines) + "\n"


def describe_launch(spec: EngineSpec, request: LaunchRequest) -> str:
    """What ``spec`` would run for ``request``: command, added environment, generated files."""
    return describe_plan(spec, spec.plan(request))
