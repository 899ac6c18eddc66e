"""The resolved settings of a session: a frozen value object, pytest-free.

``settings.py`` builds it from options and ini keys; everything else only reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_llmperf.variants import Variant

AB_BUDGET = 20  # pairs of an A/B comparison by default; see gate/paired.py for what it buys


@dataclass(frozen=True)
class Settings:
    engines: tuple[str, ...] = ()  # empty: the plugin is idle (no engine selected)
    hardware: str | None = None  # None: detect
    model: str | None = None  # None: the embedded tiny model (vLLM, llama.cpp)
    engine_args: tuple[str, ...] = ()
    engine_bin: str | None = None
    engine_env: tuple[tuple[str, str], ...] = ()  # a variant's env: extra server environment
    endpoint: str | None = None
    profiles: tuple[str, ...] = ()  # empty: every profile
    profile_files: tuple[Path, ...] = ()
    num_prompts: int | None = None
    baseline_dir: Path = Path("baselines")
    update_baselines: bool = False
    json_path: Path | None = None
    dry_run: bool = False
    startup_timeout: float = 900.0
    request_timeout: float = 600.0
    warmups: int = 8
    sharegpt_path: Path | None = None
    tokenizer: str | None = None
    api_key_env: str | None = None
    served_model_name: str | None = None
    repeat: int = 1
    confirm_reruns: int = 1
    # --llmperf-sequential N: decide each profile run by run, at most N runs (gate/sequential.py)
    sequential_budget: int | None = None
    strict: bool = False  # "improved beyond tolerance" fails too (forces baseline refresh)
    context: str = "pr"
    tolerance_scale: float = 1.0
    warn_only: bool = False
    variants_file: Path | None = None
    summary_path: Path | None = None
    html_path: Path | None = None
    history_path: Path | None = None
    max_failed_requests: int = 0
    # A profile with no comparable baseline for this machine: "record" (outside CI) or "fail".
    first_run: str = "record"
    # The configurations to run in turn: the variants file's, else one per --engine.
    variants: tuple[Variant, ...] = ()
    # --llmperf-ab: each non-reference variant (B) is measured in pairs against the reference
    # (A), both serving at once; see gate/ab.py.
    ab: bool = False
    # --llmperf-ab-budget, the most pairs per profile; None: the profile's own on the embedded
    # default, else AB_BUDGET (measure/run.py, ab_budget)
    ab_budget: int | None = None
    # --llmperf-ab-restart: A and B do not both fit; one server at a time (engines/alternation.py)
    ab_restart: bool = False
    ab_minutes: float | None = None  # a time budget per profile besides the pairs

    @property
    def active(self) -> bool:
        return bool(self.engines)
