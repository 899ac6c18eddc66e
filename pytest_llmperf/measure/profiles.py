"""Workload profiles: what one measured run sends, by name.

A profile is the workload half of a `vllm bench serve` command line. The built-in ones are the
seed documents' five cases (plus the 910B document's ShareGPT at concurrency 4); users add or
replace profiles with a YAML file of the same shape.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from pytest_llmperf.errors import ConfigError, ProfileError
from pytest_llmperf.measure.slo import Slo, parse_slos
from pytest_llmperf.measure.sweep import SweepSpec

DATASETS = ("random", "sharegpt", "shared-prefix", "multi-turn")
ENDPOINTS = ("/v1/chat/completions", "/v1/completions")
BUILTIN_FILE = "profiles.yaml"


@dataclass(frozen=True)
class WorkloadProfile:
    name: str
    dataset: str
    num_prompts: int
    input_len: int | None = None  # random only
    output_len: int | None = None  # random: required; sharegpt: None means "from the data"
    seed: int = 42
    request_rate: float = math.inf
    burstiness: float = 1.0
    max_concurrency: int | None = None
    endpoint: str = "/v1/chat/completions"
    range_ratio: float = 0.0
    # shared-prefix only: num_prefixes prefixes of prefix_len tokens, each followed by a
    # suffix_len-token suffix of its own; num_prompts / num_prefixes requests share each.
    num_prefixes: int | None = None
    prefix_len: int | None = None
    suffix_len: int | None = None
    # multi-turn only: num_prompts / turns conversations of `turns` requests each, a user turn
    # of input_len tokens, an answer of output_len; max_concurrency counts conversations.
    turns: int | None = None
    think_time: float = 0.0  # multi-turn: seconds a user takes before the next turn
    user_turns: str = "random"  # multi-turn: "random" prompts or "sharegpt" conversations
    description: str = ""
    # Prompts when the embedded tiny model serves on two CPU cores: enough for stable numbers,
    # few enough that the whole suite runs in minutes. Not part of the workload's identity.
    embedded_num_prompts: int | None = None
    # The A/B budget in pairs (--llmperf-ab-budget) at that scale, where the default of 20 is
    # too few for the profile's pair spread on two cores (docs/noise.md). Not identity either.
    embedded_ab_budget: int | None = None
    # A sweep profile measures one run per load of ``sweep`` (docs/sweeps.md), judged by ``slo``.
    sweep: SweepSpec | None = None
    slo: tuple[Slo, ...] = ()
    goodput: tuple[tuple[str, float], ...] = ()  # vLLM's --goodput, in ms: (("ttft", 2000),)
    # Run when no profile is named (--llmperf-profile). False for sweeps (unless the file says
    # true) and for workloads added after baselines existed, so that a session that ran
    # everything runs the same set as before.
    by_default: bool = True

    def scaled(self, num_prompts: int | None) -> WorkloadProfile:
        """The same workload with fewer (or more) prompts; recorded as such in results."""
        group = self.num_prefixes or self.turns
        if num_prompts is not None and group:
            # Every prefix keeps the same number of requests, every conversation its turns:
            # round down to a multiple.
            num_prompts = max(group, num_prompts - num_prompts % group)
        if num_prompts is None or num_prompts == self.num_prompts:
            return self
        return dataclasses.replace(self, num_prompts=num_prompts)

    def workload(self) -> dict[str, Any]:
        """The definition stored next to a baseline; a baseline only applies to an equal one."""
        return {
            "dataset": self.dataset,
            "input_len": self.input_len,
            "output_len": self.output_len,
            "num_prompts": self.num_prompts,
            "seed": self.seed,
            "request_rate": "inf" if math.isinf(self.request_rate) else self.request_rate,
            "burstiness": self.burstiness,
            "max_concurrency": self.max_concurrency,
            "endpoint": self.endpoint,
            "range_ratio": self.range_ratio,
            # Only when set, so that the workloads of plain profiles keep their recorded shape.
            **({"goodput": dict(self.goodput)} if self.goodput else {}),
            **({"sweep": sweep_definition(self.sweep, self.slo)} if self.sweep else {}),
            # Only where they apply, so the other profiles' stored workloads stay equal.
            **(
                {
                    "num_prefixes": self.num_prefixes,
                    "prefix_len": self.prefix_len,
                    "suffix_len": self.suffix_len,
                }
                if self.dataset == "shared-prefix"
                else {}
            ),
            **({"turns": self.turns} if self.dataset == "multi-turn" else {}),
            **({"think_time": self.think_time} if self.think_time else {}),
            **({"user_turns": self.user_turns} if self.user_turns != "random" else {}),
        }


def sweep_definition(sweep: SweepSpec, slos: tuple[Slo, ...]) -> dict[str, Any]:
    definition: dict[str, Any] = {"axis": sweep.axis}
    if sweep.explicit:
        definition["loads"] = list(sweep.loads)
    else:
        definition.update(
            start=sweep.start,
            factor=sweep.factor,
            resolution=sweep.resolution,
            max_load=sweep.max_load,
            **({"min_load": sweep.min_load} if sweep.min_load else {}),
        )
    definition["max_steps"] = sweep.max_steps
    definition["slo"] = {slo.metric: slo.limit for slo in slos}
    return definition


_FIELDS = {f.name for f in dataclasses.fields(WorkloadProfile)} - {"name"}


def _positive_int(source: str, name: str, key: str, value: Any, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ProfileError(
            f"{source}: profile {name!r}: {key} must be a positive integer, got {value!r}"
        )


_PREFIX_KEYS = ("num_prefixes", "prefix_len", "suffix_len")


def _check_shared_prefix(source: str, name: str, data: dict[str, Any]) -> None:
    shared = data["dataset"] == "shared-prefix"
    if not shared:
        stray = [key for key in _PREFIX_KEYS if data.get(key) is not None]
        if stray:
            raise ProfileError(
                f"{source}: profile {name!r}: {', '.join(stray)} only apply to dataset "
                f"shared-prefix, not {data['dataset']}; remove them or change the dataset"
            )
        return
    if data.get("input_len") is not None:
        raise ProfileError(
            f"{source}: profile {name!r}: a shared-prefix prompt is prefix_len + suffix_len "
            "tokens; remove input_len"
        )
    for key in _PREFIX_KEYS:
        _positive_int(source, name, key, data.get(key), optional=False)
    _counts_divisible(
        source, name, data, "num_prefixes", "every prefix is shared by the same number of requests"
    )


def _counts_divisible(source: str, name: str, data: dict[str, Any], divisor: str, why: str) -> None:
    """``num_prompts`` and ``embedded_num_prompts`` must be multiples of ``data[divisor]``."""
    for key in ("num_prompts", "embedded_num_prompts"):
        count = data.get(key)
        if count is not None and count % data[divisor]:
            raise ProfileError(
                f"{source}: profile {name!r}: {key} {count} is not a multiple of {divisor} "
                f"{data[divisor]}; {why}"
            )


def _check_turns(source: str, name: str, data: dict[str, Any]) -> None:
    if data["dataset"] != "multi-turn":
        stray = [key for key in ("turns", "think_time", "user_turns") if data.get(key) is not None]
        if stray:
            raise ProfileError(
                f"{source}: profile {name!r}: {', '.join(stray)} only applies to dataset "
                f"multi-turn, not {data['dataset']}; remove it or change the dataset"
            )
        return
    _positive_int(source, name, "turns", data.get("turns"), optional=False)
    think = data.get("think_time", 0.0)
    if isinstance(think, bool) or not isinstance(think, (int, float)) or think < 0:
        raise ProfileError(
            f"{source}: profile {name!r}: think_time must be a number of seconds >= 0, "
            f"got {think!r}"
        )
    data["think_time"] = float(think)
    if data.get("user_turns", "random") not in ("random", "sharegpt"):
        raise ProfileError(
            f"{source}: profile {name!r}: user_turns must be random or sharegpt, got "
            f"{data.get('user_turns')!r}"
        )
    if data.get("endpoint", ENDPOINTS[0]) != "/v1/chat/completions":
        raise ProfileError(
            f"{source}: profile {name!r}: multi-turn sends a chat history; use the endpoint "
            "/v1/chat/completions"
        )
    _counts_divisible(
        source, name, data, "turns", "num_prompts counts every turn of every conversation"
    )


def _build(source: str, name: str, raw: Any) -> WorkloadProfile:
    if not isinstance(raw, dict):
        raise ProfileError(f"{source}: profile {name!r} must be a mapping of settings")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise ProfileError(
            f"{source}: profile {name!r}: unknown key(s) {', '.join(unknown)}; "
            f"valid keys are {', '.join(sorted(_FIELDS))}"
        )
    data = dict(raw)
    if data.get("dataset") not in DATASETS:
        raise ProfileError(
            f"{source}: profile {name!r}: dataset must be one of {', '.join(DATASETS)}, "
            f"got {data.get('dataset')!r}"
        )
    if data.get("endpoint", ENDPOINTS[0]) not in ENDPOINTS:
        raise ProfileError(
            f"{source}: profile {name!r}: endpoint must be one of {', '.join(ENDPOINTS)}"
        )
    _positive_int(source, name, "num_prompts", data.get("num_prompts"), optional=False)
    _positive_int(source, name, "max_concurrency", data.get("max_concurrency"), optional=True)
    for embedded_key in ("embedded_num_prompts", "embedded_ab_budget"):
        _positive_int(source, name, embedded_key, data.get(embedded_key), optional=True)
    random_dataset = data["dataset"] == "random" or (
        data["dataset"] == "multi-turn" and data.get("user_turns", "random") == "random"
    )
    _positive_int(source, name, "input_len", data.get("input_len"), optional=not random_dataset)
    synthetic = random_dataset or data["dataset"] == "shared-prefix"  # no lengths from data
    _positive_int(source, name, "output_len", data.get("output_len"), optional=not synthetic)
    _check_shared_prefix(source, name, data)
    _check_turns(source, name, data)
    rate = data.get("request_rate", math.inf)
    if rate in ("inf", "infinity"):
        rate = math.inf
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or rate <= 0:
        raise ProfileError(
            f"{source}: profile {name!r}: request_rate must be a positive number or 'inf'"
        )
    data["request_rate"] = float(rate)
    burstiness = data.get("burstiness", 1.0)
    if not isinstance(burstiness, (int, float)) or burstiness <= 0:
        raise ProfileError(f"{source}: profile {name!r}: burstiness must be positive")
    if not isinstance(data.get("by_default", True), bool):
        raise ProfileError(f"{source}: profile {name!r}: by_default must be true or false")
    ratio = data.get("range_ratio", 0.0)
    if not isinstance(ratio, (int, float)) or not 0 <= ratio < 1:
        raise ProfileError(f"{source}: profile {name!r}: range_ratio must be in [0, 1)")
    where = f"{source}: profile {name!r}"
    data["sweep"] = _sweep(where, data.get("sweep"))
    data["slo"] = _slos(where, data.get("slo"), data["sweep"])
    data["goodput"] = _goodput(where, data.get("goodput"))
    # A sweep takes minutes and answers another question: unless a file says otherwise, it
    # runs when named, not in a session that runs every profile.
    data.setdefault("by_default", data["sweep"] is None)
    return WorkloadProfile(name=name, **data)


_SWEEP_KEYS = (
    "axis",
    "loads",
    "start",
    "factor",
    "max_steps",
    "resolution",
    "max_load",
    "min_load",
)


def _sweep(where: str, raw: Any) -> SweepSpec | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: sweep must be a mapping (axis, loads or start, ...)")
    unknown = sorted(set(raw) - set(_SWEEP_KEYS))
    if unknown:
        raise ProfileError(
            f"{where}: sweep: unknown key(s) {', '.join(map(str, unknown))}; "
            f"valid keys are {', '.join(_SWEEP_KEYS)}"
        )
    options = dict(raw)
    loads = options.pop("loads", [])
    if not isinstance(loads, list) or not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in loads
    ):
        raise ProfileError(f"{where}: sweep.loads must be a list of numbers, got {loads!r}")
    for key in ("start", "factor", "resolution", "max_load", "min_load"):
        value = options.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ProfileError(f"{where}: sweep.{key} must be a number, got {value!r}")
        if value is not None:
            options[key] = float(value)
    steps = options.get("max_steps")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)):
        raise ProfileError(f"{where}: sweep.max_steps must be a whole number, got {steps!r}")
    try:
        return SweepSpec(loads=tuple(float(x) for x in loads), **options)
    except (ConfigError, TypeError) as exc:
        raise ProfileError(f"{where}: {exc}") from None


def _slos(where: str, raw: Any, sweep: SweepSpec | None) -> tuple[Slo, ...]:
    if raw is None:
        return ()
    if sweep is None:
        raise ProfileError(
            f"{where}: slo needs a sweep (an SLO judges the steps of a sweep); add a 'sweep:' "
            "mapping or remove 'slo:'"
        )
    try:
        return parse_slos(raw, where)
    except ConfigError as exc:
        raise ProfileError(str(exc)) from None


def _goodput(where: str, raw: Any) -> tuple[tuple[str, float], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: goodput must be a mapping such as {{ttft: 2000, tpot: 100}}")
    # Imported here: metrics needs NumPy, which reading profiles otherwise does not.
    from pytest_llmperf.measure.metrics import validate_goodput_slos

    try:
        return tuple(validate_goodput_slos(raw).items())
    except ValueError as exc:
        raise ProfileError(f"{where}: {exc}") from None


def parse_profiles(text: str, source: str) -> dict[str, WorkloadProfile]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ProfileError(f"{source}{where}: not valid YAML: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("profiles"), dict):
        raise ProfileError(f"{source}: expected a top-level 'profiles:' mapping of name → settings")
    return {str(name): _build(source, str(name), raw) for name, raw in document["profiles"].items()}


def builtin_profiles() -> dict[str, WorkloadProfile]:
    text = resources.files(__package__).joinpath(BUILTIN_FILE).read_text(encoding="utf-8")
    return parse_profiles(text, f"built-in {BUILTIN_FILE}")


def load_profiles(extra_files: list[Path] | tuple[Path, ...] = ()) -> dict[str, WorkloadProfile]:
    """Built-in profiles, then each user file in order (a later definition wins)."""
    profiles = builtin_profiles()
    for path in extra_files:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ProfileError(
                f"cannot read profiles file {path} (ini llmperf_profiles): {exc.strerror}"
            ) from None
        profiles.update(parse_profiles(text, str(path)))
    return profiles


def select(profiles: dict[str, WorkloadProfile], names: list[str]) -> list[WorkloadProfile]:
    """Profiles by name, in the order given; an unknown name lists the valid ones."""
    unknown = [name for name in names if name not in profiles]
    if unknown:
        raise ProfileError(
            f"unknown profile(s) {', '.join(repr(n) for n in unknown)} (--llmperf-profile); "
            f"valid profiles are {', '.join(profiles)}"
        )
    return [profiles[name] for name in names]
