"""Every option and ini key of the plugin, resolved once into a frozen ``Settings``.

Command line beats ini, ini beats the default. Bad values become a ``pytest.UsageError`` that
names the option and lists what would be valid, before any engine is started.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf import redact, rootdir_guard
from pytest_llmperf.config import AB_BUDGET, Settings
from pytest_llmperf.errors import ConfigError
from pytest_llmperf.variants import Variant, from_engines, load_variants

GROUP = "llmperf"
CONTEXTS = ("pr", "nightly")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup(GROUP, "LLM serving performance gate (pytest-llmperf)")

    def option(names: list[str], ini: str | None, help_text: str, **kwargs: Any) -> None:
        # One destination per setting, named like its ini key: llmperf_<key>.
        key = names[-1].removeprefix("--").removeprefix("llmperf-").replace("-", "_")
        group.addoption(
            *names,
            dest=f"llmperf_{key}",
            help=help_text + (f" [ini: {ini}]" if ini else ""),
            **kwargs,
        )
        if kwargs.get("action") not in ("store_true", "store_false"):
            rootdir_guard.VALUE_OPTIONS.update(names)
        if ini:
            parser.addini(ini, help_text, default=None)

    option(
        ["--engine", "--llmperf-engine"],
        "llmperf_engine",
        "engine(s) to start, comma-separated, one server at a time: vllm, sglang, trtllm, "
        "mindie, llamacpp, external. Without it the plugin measures nothing",
    )
    option(
        ["--hardware", "--llmperf-hardware"],
        "llmperf_hardware",
        "hardware key of the baselines (a100, h100, h200, 910b, cpu, ...); detected when "
        "omitted, and a mismatch with the detected hardware is reported",
    )
    option(
        ["--update-baselines", "--llmperf-update-baselines"],
        None,
        "record the measured numbers as the new baselines (keeps hand-edited tolerances)",
        action="store_true",
        default=False,
    )
    option(
        ["--model", "--llmperf-model"],
        "llmperf_model",
        "model to serve (path or hub id); default: the embedded tiny model (vLLM-CPU, llama.cpp)",
    )
    option(
        ["--engine-args", "--llmperf-engine-args"],
        "llmperf_engine_args",
        "extra engine arguments, one shell-quoted string, passed as an argv list "
        '(e.g. "--max-num-seqs 1")',
    )
    option(
        ["--llmperf-engine-bin"],
        "llmperf_engine_bin",
        "executable to start instead of the engine's default (e.g. a venv's python or "
        "/opt/engine/bin/trtllm-serve)",
    )
    option(
        ["--endpoint", "--llmperf-endpoint"],
        "llmperf_endpoint",
        "URL of an already-running OpenAI-compatible server; nothing is started",
    )
    profile_names = ["--llmperf-profile"]
    if importlib.util.find_spec("pytest_profiling") is None:
        # pytest-profiling owns --profile; taking it too would stop pytest at start-up.
        profile_names.insert(0, "--profile")
    option(
        profile_names,
        "llmperf_profile",
        "profiles to run, comma-separated (default: all but those that run only when named). "
        "Built-in: sharegpt, short, medium, long, very-long, sharegpt-bs4; when named: "
        "shared-prefix, multi-turn, medium-sweep, embedded-sweep, embedded-concurrency-sweep",
        action="append",
        default=None,
    )
    parser.addini(
        "llmperf_profiles", "YAML files with extra workload profiles", type="paths", default=[]
    )
    option(
        ["--num-prompts", "--llmperf-num-prompts"],
        "llmperf_num_prompts",
        "cap every profile at N prompts (recorded in the result and the baseline)",
    )
    option(
        ["--baseline-dir", "--llmperf-baseline-dir"],
        "llmperf_baseline_dir",
        "folder of baseline files (default: baselines/ under the rootdir)",
    )
    option(
        ["--llmperf-json"], "llmperf_json", "write every result of the session to this JSON file"
    )
    option(
        ["--llmperf-dry-run"],
        None,
        "print the exact engine command, environment and generated config, start nothing",
        action="store_true",
        default=False,
    )
    option(
        ["--llmperf-startup-timeout"],
        "llmperf_startup_timeout",
        "seconds to wait for the engine to become ready (default 900)",
    )
    option(
        ["--llmperf-request-timeout"],
        "llmperf_request_timeout",
        "seconds one request may take before it counts as failed (default 600)",
    )
    option(
        ["--llmperf-warmups"],
        "llmperf_warmups",
        "unmeasured warm-up requests before each profile (default 8, at most the profile's "
        "prompt count; 0 disables)",
    )
    option(
        ["--llmperf-sharegpt"],
        "llmperf_sharegpt",
        "path of ShareGPT_V3_unfiltered_cleaned_split.json for the sharegpt profiles",
    )
    option(
        ["--llmperf-tokenizer"],
        "llmperf_tokenizer",
        "tokenizer (folder or hub id) for token-exact prompts; default: the model",
    )
    option(
        ["--llmperf-api-key-env"],
        "llmperf_api_key_env",
        "name of the environment variable holding the endpoint's API key (sent only in the "
        "Authorization header, never written anywhere)",
    )
    option(
        ["--llmperf-served-model-name"],
        "llmperf_served_model_name",
        "model name to send in requests (default: the first of GET /v1/models)",
    )
    option(
        ["--llmperf-repeat"],
        "llmperf_repeat",
        "measure each profile N times; the verdict uses the median and the spread",
    )
    option(
        ["--llmperf-confirm"],
        "llmperf_confirm",
        "reruns that must agree before a regression fails the test (default 1; 0 = none)",
    )
    option(
        ["--llmperf-sequential"],
        "llmperf_sequential",
        "decide each profile run by run against its stored baseline and stop when the "
        "verdict is known, at most N runs (replaces --llmperf-repeat and --llmperf-confirm "
        "for the verdict; docs/noise.md)",
    )
    option(
        ["--llmperf-strict"],
        None,
        "fail when a metric improved beyond its tolerance (forces a baseline refresh)",
        action="store_true",
        default=False,
    )
    option(
        ["--llmperf-context"],
        "llmperf_context",
        "gate context: pr (default: tolerances as recorded) or nightly (see "
        "llmperf_nightly_tolerance_scale and llmperf_nightly_warn_only)",
    )
    parser.addini(
        "llmperf_pr_tolerance_scale", "multiply tolerances in the pr context", default="1.0"
    )
    parser.addini(
        "llmperf_nightly_tolerance_scale",
        "multiply tolerances in the nightly context",
        default="1.0",
    )
    parser.addini(
        "llmperf_pr_warn_only",
        "report regressions without failing (pr)",
        type="bool",
        default=False,
    )
    parser.addini(
        "llmperf_nightly_warn_only",
        "report regressions without failing (nightly)",
        type="bool",
        default=False,
    )
    option(
        ["--llmperf-max-failed"],
        "llmperf_max_failed",
        "failed requests a run may have before its test fails (default 0)",
    )
    option(
        ["--llmperf-variants"],
        "llmperf_variants",
        "YAML file of named configurations to run in turn and compare",
    )
    option(
        ["--llmperf-summary"],
        "llmperf_summary",
        "write a Markdown summary here (default: $GITHUB_STEP_SUMMARY when set)",
    )
    option(
        ["--llmperf-first-run"],
        "llmperf_first_run",
        "a profile with no baseline comparable with this machine: record (the numbers are "
        "written to this machine's baseline file and the test passes) or fail (with the "
        "command that records them). Default: fail when the CI environment variable is set, "
        "else record",
    )
    option(
        ["--llmperf-ab"],
        "llmperf_ab",
        "run each profile as an A/B experiment: the reference variant (A) and each other "
        "variant (B) serve at once, runs alternate A,B,B,A,... and the test fails when B "
        "regressed against A (no stored baseline is read); an inconclusive experiment passes "
        "with a warning, or fails under --llmperf-strict",
        action="store_true",
        default=None,
    )
    option(
        ["--llmperf-ab-candidate-args"],
        "llmperf_ab_candidate_args",
        "A/B without a variants file: B (named candidate) is the reference configuration plus "
        'these engine arguments (e.g. "--max-num-seqs 1"); implies --llmperf-ab',
    )
    option(
        ["--llmperf-ab-restart"],
        "llmperf_ab_restart",
        "A/B where the two servers do not fit on the machine at once: one serves at a time, "
        "the other is stopped and started again at each switch (about one restart per pair; "
        "the result says what it cost); implies --llmperf-ab",
        action="store_true",
        default=None,
    )
    option(
        ["--llmperf-ab-budget"],
        "llmperf_ab_budget",
        f"A/B: the most pairs of runs per profile before the verdict is inconclusive "
        f"(default {AB_BUDGET}; on the embedded default a profile may set its own, "
        f"embedded_ab_budget in profiles.yaml: 40 for long, sharegpt and sharegpt-bs4)",
    )
    option(
        ["--llmperf-ab-minutes"],
        "llmperf_ab_minutes",
        "A/B: the most minutes per profile (checked after each pair; default: no limit)",
    )
    option(["--llmperf-html"], "llmperf_html", "write an HTML report with plots here")
    option(
        ["--llmperf-history"],
        "llmperf_history",
        "append every result to this JSON-lines history file",
    )


def _get(config: pytest.Config, name: str) -> Any:
    """Command line first, then the ini key of the same name."""
    value = config.getoption(f"llmperf_{name}", default=None)
    if value is None or value == []:
        try:
            value = config.getini(f"llmperf_{name}")
        except ValueError:
            value = None
    return None if value == "" else value


def _default(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def _positive_int(option: str, raw: Any, *, allow_zero: bool = False) -> int:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = None
    if value is None or value < 0 or (value == 0 and not allow_zero):
        expectation = "a non-negative integer" if allow_zero else "a positive integer"
        raise ConfigError(f"{option}: expected {expectation}, got {raw!r}")
    return value


def _positive_float(option: str, raw: Any, unit: str = "seconds") -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise ConfigError(f"{option}: expected a positive number of {unit}, got {raw!r}")
    return value


def _split_list(raw: Any) -> tuple[str, ...]:
    items = raw if isinstance(raw, list) else [raw]
    names: list[str] = []
    for item in items:
        names.extend(part.strip() for part in str(item).split(",") if part.strip())
    return tuple(names)


def _path(config: pytest.Config, raw: Any) -> Path:
    path = Path(str(raw)).expanduser()
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


FIRST_RUN_CHOICES = ("record", "fail")


def in_ci(environ: Mapping[str, str] | None = None) -> bool:
    """The ``CI`` variable that GitHub Actions, GitLab CI, Buildkite, CircleCI, Travis and
    others set (any value but empty, 0 or false)."""
    value = (os.environ if environ is None else environ).get("CI", "")
    return value.strip().lower() not in ("", "0", "false", "no")


def _first_run(raw: Any) -> str:
    if raw is None:
        return "fail" if in_ci() else "record"
    value = str(raw).strip().lower()
    if value not in FIRST_RUN_CHOICES:
        raise ConfigError(
            f"--llmperf-first-run: expected {' or '.join(FIRST_RUN_CHOICES)}, got {raw!r}"
        )
    return value


def resolve(config: pytest.Config) -> Settings:
    """Build ``Settings`` from the command line and ini; raises ``ConfigError``."""
    from pytest_llmperf import engines
    from pytest_llmperf.engines import hardware

    raw_engines = _get(config, "engine")
    engine_names = _split_list(raw_engines) if raw_engines else ()
    for name in engine_names:
        engines.get_engine(name)  # raises with the list of valid names
    if len(set(engine_names)) != len(engine_names):
        raise ConfigError(f"--engine: {','.join(engine_names)} names an engine twice")

    hw = _get(config, "hardware")
    if hw is not None:
        hw = str(hw).strip().lower()
        if not hardware.valid_key(hw):
            raise ConfigError(
                f"--hardware: unknown hardware {hw!r}; valid keys are "
                f"{', '.join(hardware.KNOWN_HARDWARE)}, or one of them followed by dash-joined "
                f"words (a machine key such as cpu-avx512-2c or a100-80gb-x8)"
            )

    raw_args = _get(config, "engine_args")
    try:
        engine_args = tuple(shlex.split(str(raw_args))) if raw_args else ()
    except ValueError as exc:
        raise ConfigError(f"--engine-args: cannot split {raw_args!r}: {exc}") from None

    endpoint = _get(config, "endpoint")
    if endpoint is not None and not str(endpoint).startswith(("http://", "https://")):
        raise ConfigError(f"--endpoint: expected an http:// or https:// URL, got {endpoint!r}")
    if endpoint is not None and not engine_names:
        engine_names = ("external",)  # an endpoint alone is what to measure

    context = str(_get(config, "context") or "pr")
    if context not in CONTEXTS:
        raise ConfigError(
            f"--llmperf-context: expected one of {', '.join(CONTEXTS)}, got {context!r}"
        )
    scale_raw = config.getini(f"llmperf_{context}_tolerance_scale")
    try:
        tolerance_scale = float(scale_raw)
    except (TypeError, ValueError):
        tolerance_scale = math.nan
    if not tolerance_scale > 0:
        raise ConfigError(
            f"ini llmperf_{context}_tolerance_scale: expected a positive number, got {scale_raw!r}"
        )

    num_prompts = _get(config, "num_prompts")
    baseline_dir = _get(config, "baseline_dir")
    api_key_env = _get(config, "api_key_env")
    if api_key_env is not None and not redact.looks_like_variable_name(str(api_key_env)):
        raise ConfigError(
            "--llmperf-api-key-env: expected the NAME of an environment variable, got a value "
            "that is not a variable name or looks like a token (the key itself must not go on "
            "the command line)"
        )

    def optional_path(name: str) -> Path | None:
        value = _get(config, name)
        return None if value is None else _path(config, value)

    variants_file = optional_path("variants")
    if variants_file is not None:
        if config.getoption("llmperf_engine", default=None):
            raise ConfigError(
                "--llmperf-variants: the file names the engine of each variant; drop --engine"
            )
        variants = load_variants(variants_file, engines.engine_names())
        engine_names = tuple(dict.fromkeys(v.engine for v in variants))
    else:
        variants = from_engines(engine_names)
    ab, variants = _ab(config, variants, engine_names)
    html_path = optional_path("html")
    if html_path is not None:
        from pytest_llmperf.reports.html_report import require_plotly

        require_plotly()

    return Settings(
        engines=engine_names,
        hardware=hw,
        model=_get(config, "model"),
        engine_args=engine_args,
        engine_bin=_get(config, "engine_bin"),
        endpoint=None if endpoint is None else str(endpoint).rstrip("/"),
        profiles=_split_list(_get(config, "profile") or []),
        profile_files=tuple(Path(p) for p in config.getini("llmperf_profiles")),
        num_prompts=None if num_prompts is None else _positive_int("--num-prompts", num_prompts),
        baseline_dir=(
            _path(config, baseline_dir)
            if baseline_dir is not None
            else Path(config.rootpath) / "baselines"
        ),
        update_baselines=bool(config.getoption("llmperf_update_baselines")),
        json_path=optional_path("json"),
        dry_run=bool(config.getoption("llmperf_dry_run")),
        startup_timeout=_positive_float(
            "--llmperf-startup-timeout", _get(config, "startup_timeout") or 900
        ),
        request_timeout=_positive_float(
            "--llmperf-request-timeout", _get(config, "request_timeout") or 600
        ),
        warmups=_positive_int(
            "--llmperf-warmups", _default(_get(config, "warmups"), 8), allow_zero=True
        ),
        sharegpt_path=optional_path("sharegpt"),
        tokenizer=_get(config, "tokenizer"),
        api_key_env=api_key_env,
        served_model_name=_get(config, "served_model_name"),
        repeat=_positive_int("--llmperf-repeat", _get(config, "repeat") or 1),
        confirm_reruns=_positive_int(
            "--llmperf-confirm", _default(_get(config, "confirm"), 1), allow_zero=True
        ),
        sequential_budget=None
        if _get(config, "sequential") is None
        else _positive_int("--llmperf-sequential", _get(config, "sequential")),
        strict=bool(config.getoption("llmperf_strict")),
        context=context,
        tolerance_scale=tolerance_scale,
        warn_only=bool(config.getini(f"llmperf_{context}_warn_only")),
        variants_file=variants_file,
        summary_path=optional_path("summary"),
        html_path=html_path,
        history_path=optional_path("history"),
        max_failed_requests=_positive_int(
            "--llmperf-max-failed", _get(config, "max_failed") or 0, allow_zero=True
        ),
        first_run=_first_run(_get(config, "first_run")),
        variants=variants,
        ab=ab,
        ab_restart=ab and _flag(_get(config, "ab_restart") or False),
        ab_budget=None
        if _get(config, "ab_budget") is None
        else _positive_int("--llmperf-ab-budget", _get(config, "ab_budget")),
        ab_minutes=None
        if _get(config, "ab_minutes") is None
        else _positive_float("--llmperf-ab-minutes", _get(config, "ab_minutes"), "minutes"),
    )


def _flag(raw: Any) -> bool:
    """A flag given on the command line (True) or as an ini value (true/false, 1/0)."""
    if isinstance(raw, bool):
        return raw
    return str(raw).strip().lower() in ("1", "true", "yes", "on")


def _ab(
    config: pytest.Config, variants: tuple[Variant, ...], engine_names: tuple[str, ...]
) -> tuple[bool, tuple[Variant, ...]]:
    """Whether this is an A/B session, and its variants (with the shorthand's candidate)."""
    raw_args = _get(config, "ab_candidate_args")
    restart = _flag(_get(config, "ab_restart") or False)
    ab = _flag(_get(config, "ab") or False) or raw_args is not None or restart
    if not ab:
        return False, variants
    if config.getoption("llmperf_update_baselines"):
        raise ConfigError(
            "--update-baselines with --llmperf-ab: an A/B experiment compares two running "
            "configurations and stores no baseline; run one of them without --llmperf-ab to "
            "record"
        )
    if restart and (
        config.getoption("llmperf_endpoint", default=None) or any(v.endpoint for v in variants)
    ):
        raise ConfigError(
            "--llmperf-ab-restart: an endpoint is a server the plugin does not start, so it "
            "cannot be stopped and restarted; give A and B as engines the plugin starts, or "
            "drop the option (both then serve at once)"
        )
    if raw_args is not None:
        if config.getoption("llmperf_variants", default=None) or len(variants) != 1:
            raise ConfigError(
                "--llmperf-ab-candidate-args: it builds B from the one configuration given; "
                "with a variants file or several engines, describe B in the variants file"
            )
        try:
            args = tuple(shlex.split(str(raw_args)))
        except ValueError as exc:
            raise ConfigError(
                f"--llmperf-ab-candidate-args: cannot split {raw_args!r}: {exc}"
            ) from None
        if not args:
            raise ConfigError("--llmperf-ab-candidate-args: no arguments given")
        reference = dataclasses.replace(variants[0], reference=True)
        candidate = dataclasses.replace(
            reference,
            name="candidate",
            reference=False,
            engine_args=(*reference.engine_args, *args),
        )
        return True, (reference, candidate)
    if len(variants) < 2:
        raise ConfigError(
            "--llmperf-ab: needs a candidate besides the reference: "
            '--llmperf-ab-candidate-args "ARGS", a --llmperf-variants file with two or more '
            f"variants, or --engine=a,b (got {','.join(engine_names) or 'no engine'})"
        )
    return True, variants
