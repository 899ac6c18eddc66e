"""One measurement of a profile, the way `vllm bench serve` measures it, plus the controls a
gate needs on top: warm-up requests before measuring, and no run served from what another
left in the prefix cache (a fresh salt, or the engine's reset).
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf.config import AB_BUDGET, Settings
from pytest_llmperf.engines.base import EngineSpec
from pytest_llmperf.engines.session import Target, reset_prefix_cache
from pytest_llmperf.errors import EngineStartError
from pytest_llmperf.measure.profiles import WorkloadProfile
from pytest_llmperf.models import RequestRecord, SampleRequest

if TYPE_CHECKING:
    from pytest_llmperf.measure.engine_metrics import EngineMetricsProbe
    from pytest_llmperf.measure.loadgen import LoadConfig

STANDARD_SHAREGPT = "ShareGPT_V3_unfiltered_cleaned_split.json"


@dataclass(frozen=True)
class Measurement:
    metrics: dict[str, Any]
    workload: dict[str, Any]
    errors: tuple[str, ...]
    failed: int
    notes: tuple[str, ...] = ()
    series: dict[str, Any] = field(default_factory=dict)  # series.summarize(): for the plots
    samples: dict[str, int] = field(default_factory=dict)  # metrics.sample_counts()
    # A sweep's steps and what they add up to (gate.sweep.measure_sweep); empty for a run.
    sweep: dict[str, Any] = field(default_factory=dict)


class Workloads:
    """Prompts per profile, built once per session (tokenizing 32k-token prompts is not free)."""

    def __init__(self, settings: Settings, cache_dir: Path) -> None:
        self.settings = settings
        self.cache_dir = cache_dir
        self._tokenizers: dict[str, Any] = {}
        self._requests: dict[tuple[str, str, int], list[SampleRequest]] = {}
        # Simultaneous A/B pairs measure from two threads; a fast tokenizer used by two
        # threads at once raises, and the prompts need building only once anyway.
        self._building = threading.Lock()

    def tokenizer(self, model: str) -> Any:
        from pytest_llmperf.measure import datasets

        name = self.settings.tokenizer or model
        if name not in self._tokenizers:
            self._tokenizers[name] = datasets.load_tokenizer(name)
        return self._tokenizers[name]

    def sharegpt_path(self, embedded: bool) -> Path | None:
        if self.settings.sharegpt_path is not None:
            return self.settings.sharegpt_path
        if not embedded:
            return None  # datasets raises the error that names the option
        from pytest_llmperf.measure import datasets

        path = self.cache_dir / "synthetic-sharegpt.json"
        if not path.exists():
            datasets.write_synthetic_sharegpt(path)
        return path

    def workload(self, profile: WorkloadProfile, embedded: bool) -> dict[str, Any]:
        workload = profile.workload()
        if profile.dataset == "sharegpt" or profile.user_turns == "sharegpt":
            path = self.sharegpt_path(embedded)
            if path is not None and path.name != STANDARD_SHAREGPT:
                workload["dataset_file"] = path.name  # another file is another workload
        return workload

    def requests(self, profile: WorkloadProfile, model: str, embedded: bool) -> list[SampleRequest]:
        from pytest_llmperf.measure import datasets

        key = (profile.name, model, profile.num_prompts)
        with self._building:
            if key not in self._requests:
                self._requests[key] = datasets.build_requests(
                    profile, self.tokenizer(model), sharegpt_path=self.sharegpt_path(embedded)
                )
            return self._requests[key]


def measure(
    target: Target,
    profile: WorkloadProfile,
    workloads: Workloads,
    settings: Settings,
    *,
    headers: dict[str, str],
    api_key: str | None = None,
    progress: Callable[[int, int, int], None] | None = None,
) -> Measurement:
    """Warm up, reset the prefix cache, send the profile, compute vLLM's metrics."""
    from pytest_llmperf.measure import loadgen, metrics, multiturn, series

    # An engine that died earlier in the session fails this test now, not after timeouts.
    target.check_alive()
    requests = workloads.requests(profile, target.model, target.embedded)
    config = loadgen.LoadConfig(
        base_url=target.base_url,
        model=target.served_model,
        endpoint=profile.endpoint,
        request_rate=profile.request_rate,
        burstiness=profile.burstiness,
        max_concurrency=profile.max_concurrency,
        seed=profile.seed,
        request_timeout=settings.request_timeout,
        quirks=target.spec.quirks,
        api_key=api_key,
    )
    notes: list[str] = []
    if settings.warmups:
        warmup = loadgen.run_load(
            salted(config, target.spec), _warmup_requests(requests, settings.warmups)
        )
        if not any(record.success for record in warmup.records):
            target.check_serving()
            first = next((r.error for r in warmup.records if r.error), "no response")
            raise EngineStartError(f"every warm-up request failed: {first}")
    # A salted engine needs no reset: the next run's salt keys a cache of its own.
    note = None if target.spec.prefix_cache_salt else reset_prefix_cache(target, headers)
    if note:
        notes.append(note)
    probe = engine_probe(target, headers)
    unsent, per_turn = 0, {}
    with probe or contextlib.nullcontext():
        if profile.dataset == "multi-turn":
            chats = multiturn.run_conversations(
                salted(config, target.spec),
                requests,
                turns=profile.turns or 1,
                think_time=profile.think_time,
            )
            result = loadgen.LoadResult(chats.records, chats.duration)
            unsent, per_turn = chats.unsent, multiturn.turn_metrics(chats)
        else:
            result = loadgen.run_load(salted(config, target.spec), requests, progress=progress)
    if probe and probe.note:
        notes.append(probe.note)
    if all(record.success for record in result.records):
        target.check_alive()
    else:
        target.check_serving()  # failed requests may be the engine dying under the load
    computed = metrics.compute_metrics(
        result.records, result.duration, goodput_slos_ms=dict(profile.goodput) or None
    )
    computed.update(per_turn)
    if unsent:
        computed["failed"] += unsent  # turns after a failed one were never sent
    # engine_*: next to the client's metrics, so they are recorded, shown and gateable.
    computed.update(probe.metrics if probe else {})
    return Measurement(
        metrics=computed,
        workload=workloads.workload(profile, target.embedded),
        errors=_first_errors(result.records),
        failed=unsent + sum(1 for record in result.records if not record.success),
        notes=tuple(notes),
        series=series.summarize(result.records),
        samples=metrics.sample_counts(result.records),
    )


def engine_probe(target: Target, headers: dict[str, str]) -> EngineMetricsProbe | None:
    """The engine's own counters around the run, where its spec says where they are."""
    from pytest_llmperf.measure.engine_metrics import EngineMetricsProbe

    names = target.spec.engine_metrics
    return EngineMetricsProbe(names, target.base_url, headers) if names else None


def salted(config: LoadConfig, spec: EngineSpec) -> LoadConfig:
    """``config`` with a fresh prefix-cache salt, for an engine that takes one: a run's
    requests share their cache as with vllm bench, but nothing another run left there."""
    if not spec.prefix_cache_salt:
        return config
    salt = {"cache_salt": secrets.token_hex(16)}
    return dataclasses.replace(config, extra_body={**config.extra_body, **salt})


def _warmup_requests(requests: Sequence[SampleRequest], count: int) -> list[SampleRequest]:
    # The first prompts: the warm-up touches the same shapes as the measured run, and never
    # sends more than the run itself (8 warm-ups of very-long's 32k-token prompts took twice
    # as long as its measured run).
    return list(requests[: min(count, len(requests))])


def _first_errors(records: Sequence[RequestRecord], limit: int = 5) -> tuple[str, ...]:
    errors: list[str] = []
    for record in records:
        if not record.success:
            errors.append(record.error or "unknown error")
            if len(errors) == limit:
                break
    return tuple(errors)


def scaled_profile(
    profile: WorkloadProfile, settings: Settings, *, embedded: bool
) -> WorkloadProfile:
    """Apply --num-prompts (a cap), or the embedded default's own scale."""
    if settings.num_prompts is not None:
        return profile.scaled(min(settings.num_prompts, profile.num_prompts))
    if embedded and profile.embedded_num_prompts is not None:
        return profile.scaled(profile.embedded_num_prompts)
    return profile


def ab_budget(profile: WorkloadProfile, settings: Settings, *, embedded: bool) -> int:
    """The most pairs of an A/B comparison: --llmperf-ab-budget, else the profile's own budget
    on the embedded default at its own scale, else the default."""
    if settings.ab_budget is not None:
        return settings.ab_budget
    own_scale = settings.num_prompts is None
    if embedded and own_scale and profile.embedded_ab_budget is not None:
        return profile.embedded_ab_budget
    return AB_BUDGET
