"""Dry run: say exactly what the plugin would start, without starting anything.

The text is meant to be copied: the command line is shell-quoted, the environment variables are
those the plugin adds to the inherited environment, and generated files are shown verbatim.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from pytest_llmperf.engines.base import EngineSpec, LaunchPlan, LaunchRequest


def command_line(argv: Sequence[str]) -> str:
    """The argv as one line a POSIX shell would split back into the same argv."""
    return shlex.join(argv)


def describe_plan(spec: EngineSpec, plan: LaunchPlan) -> str:
    lines = [f"engine: {spec.name} ({spec.display_name})"]
    if not spec.starts_server:
        lines.append(f"command: (none: the plugin starts nothing and uses {plan.base_url})")
    else:
        lines.append(f"command: {command_line(plan.argv)}")
    if plan.env:
        lines.append("environment added by the plugin:")
        lines += [f"  {name}={shlex.quote(value)}" for name, value in sorted(plan.env.items())]
    else:
        lines.append("environment added by the plugin: (none)")
    for folder in plan.directories:
        lines.append(f"folder created before the start: {folder}")
    for path, content in plan.files.items():
        lines.append(f"file written before the start: {path}")
        lines.append(f"----- begin {path.name} -----")
        lines.append(content.rstrip("\n"))
        lines.append(f"----- end {path.name} -----")
    lines.append(f"API: {plan.base_url}/v1")
    lines.append(f"ready when: GET {plan.health_url} answers 200")
    return "\n".join(lines) + "\n"


def describe_launch(spec: EngineSpec, request: LaunchRequest) -> str:
    """What ``spec`` would run for ``request``: command, added environment, generated files."""
    return describe_plan(spec, spec.plan(request))
