"""Catch a path option whose value moved pytest's rootdir.

pytest chooses its rootdir and configuration file before it loads plugins, from the
arguments it can tell are paths. It does not know this plugin's options then, so in
``--model /models/qwen`` it takes ``/models/qwen`` for a test path: the rootdir becomes the
common ancestor (often ``/``), the project's ``pyproject.toml`` is not read, ``testpaths`` is
lost and pytest collects whatever lies there. A plugin cannot choose the rootdir again; it can
see that this happened and stop with the fix: ``--model=/models/qwen``.
"""

from __future__ import annotations

import inspect
import itertools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import ConfigError

# Options of this plugin that take a value (settings.add_options registers them here).
VALUE_OPTIONS: set[str] = set()


def _values_of_ours(args: Sequence[str]) -> list[tuple[str, str]]:
    """(option, value) for each of our options written with its value as the next argument."""
    found = []
    for option, value in itertools.pairwise(args):
        if option in VALUE_OPTIONS and not value.startswith("-"):
            found.append((option, value))
    return found


def _rootdir_function() -> Callable[[Sequence[str], Path], Path | None] | None:
    """pytest's own rootdir rule as a function of the free arguments (its signature varies
    between pytest versions; None when it cannot be called)."""
    try:
        from _pytest.config.findpaths import determine_setup
    except ImportError:
        return None
    accepted = inspect.signature(determine_setup).parameters

    def rootdir(args: Sequence[str], invocation_dir: Path) -> Path | None:
        given: dict[str, Any] = {
            "inifile": None,
            "override_ini": None,
            "args": list(args),
            "rootdir_cmd_arg": None,
            "invocation_dir": invocation_dir,
        }
        try:
            result = determine_setup(**{k: v for k, v in given.items() if k in accepted})
        except Exception:  # a private API: any surprise means "cannot tell"
            return None
        return Path(result[0])

    return rootdir


def check(args: Sequence[str], rootpath: Path, inipath: Path | None) -> None:
    """Raise ``ConfigError`` when a value of ours decided pytest's rootdir."""
    ours = _values_of_ours(args)
    if not ours or any(a.startswith(("--rootdir", "-c", "--config-file")) for a in args):
        return
    rootdir = _rootdir_function()
    if rootdir is None:
        return
    invocation = Path(os.getcwd())
    free = [a for a in args if not a.startswith("-") and os.path.exists(a)]
    values = {value for _, value in ours}
    chosen = rootdir(free, invocation)
    without = rootdir([a for a in free if a not in values], invocation)
    if chosen is None or without is None or chosen == without or chosen != rootpath:
        return
    option, value = next((o, v) for o, v in ours if v in free)
    lost = f" ({inipath} was read instead)" if inipath else ""
    raise ConfigError(
        f"{option} {value}: pytest took {value!r} for a test path and chose {str(chosen)!r} "
        f"as its rootdir instead of {str(without)!r}, so that folder's configuration "
        f"(testpaths, ini options) was not read{lost}. Write the value with '=': "
        f"{option}={value}"
    )
