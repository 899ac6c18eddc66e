"""The package's rooms import one way, and the core runs without pytest.

Rooms, lowest first: the shared core (top-level value and utility modules), ``engines``,
``measure``, ``gate``, ``reports``, then the pytest side (``plugin``, ``settings``,
``hookspecs``). A module may import its own room and lower ones; an import of a higher room
(even inside a function) would make the lower room depend on the higher one.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_llmperf"
PYTEST_SIDE = ("plugin", "settings", "hookspecs")
ORDER = ("core", "engines", "measure", "gate", "reports", "pytest")


def room_of(module: str) -> str:
    """``pytest_llmperf.gate.loop`` → ``gate``; top-level modules are the core or pytest."""
    parts = module.split(".")[1:]
    if not parts:
        return "core"
    if parts[0] in ORDER:
        return parts[0]
    return "pytest" if parts[0] in PYTEST_SIDE else "core"


def modules() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def imported(module: str) -> list[str]:
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = PACKAGE.parent / module.replace(".", "/") / "__init__.py"
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "pytest_llmperf":
                names.extend(f"pytest_llmperf.{alias.name}" for alias in node.names)
            elif node.module.startswith("pytest_llmperf."):
                names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(a.name for a in node.names if a.name.startswith("pytest_llmperf"))
    return names


@pytest.mark.parametrize("module", modules())
def test_no_module_imports_a_higher_room(module: str) -> None:
    here = ORDER.index(room_of(module))
    upwards = [name for name in imported(module) if ORDER.index(room_of(name)) > here]
    assert upwards == [], f"{module} ({room_of(module)}) imports higher rooms: {upwards}"


def test_the_room_rule_sees_an_upward_import() -> None:
    # The checker itself: a gate module importing a report is caught.
    assert ORDER.index(room_of("pytest_llmperf.reports.tables")) > ORDER.index(
        room_of("pytest_llmperf.gate.loop")
    )
    assert room_of("pytest_llmperf.settings") == "pytest"
    assert room_of("pytest_llmperf.models") == "core"


CORE_IMPORT = """
import importlib, sys
for name in {names!r}:
    importlib.import_module(name)
print("pytest" in sys.modules)
"""


def _imports_pytest(names: list[str]) -> bool:
    done = subprocess.run(
        [sys.executable, "-c", CORE_IMPORT.format(names=names)],
        capture_output=True,
        text=True,
        check=True,
        cwd=PACKAGE.parent,
    )
    return done.stdout.strip() == "True"


def test_everything_but_the_pytest_side_runs_without_pytest() -> None:
    core = [m for m in modules() if room_of(m) != "pytest" and not m.endswith("__main__")]
    assert "pytest_llmperf.gate.loop" in core
    assert not _imports_pytest(core)


def test_the_pytest_free_check_would_see_pytest() -> None:
    assert _imports_pytest(["pytest_llmperf.settings"])
