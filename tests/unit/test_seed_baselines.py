"""The seed baselines are an exact transcription of the two seed documents.

`baselines/a100/qwen3-32b/` and `baselines/910b/qwen3-30b-a3b/` were typed by hand from the
seed documents (Japanese reports of the GPUStack Inference Performance Lab, kept in the folder
`shared/seeds` next to the repository). This module reads the documents with its own small
parser, independent of the plugin, and holds the YAML files to them figure by figure: a slip of
the keyboard, a dropped or duplicated block, an invented entry or a lost failure fails here.
The schema checks at the top need only the YAML files and always run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_llmperf.measure.profiles import WorkloadProfile, builtin_profiles

REPO = Path(__file__).resolve().parents[2]
BASELINES = REPO / "baselines"
# The seeds live beside the repository, not in it: `<parent>/shared/seeds`.
SEEDS = REPO.parent / "shared" / "seeds"

# seed file -> (hardware key, model slug, model as served)
DOCUMENTS = {
    "000_c56bb875ccb1f1f6.txt": ("a100", "qwen3-32b", "Qwen/Qwen3-32B"),
    "004_6305a32b79b65924.txt": ("910b", "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"),
}
EXPECTED_FILES = {
    "a100/qwen3-32b": {"vllm.yaml", "sglang.yaml", "trtllm.yaml", "summary.yaml"},
    "910b/qwen3-30b-a3b": {"vllm.yaml", "mindie.yaml", "summary.yaml"},
}
DEFAULT_TOLERANCES = {"total_token_throughput": 5.0, "mean_tpot_ms": 10.0}

# The order docs/baselines.md gives; a file must keep it so a re-recording diffs cleanly.
TOP_KEYS = ["schema", "hardware", "model", "engine", "source", "profiles", "variants"]
ENTRY_KEYS = [
    "status",
    "error",
    "recorded",
    "engine_version",
    "command",
    "workload",
    "metrics",
    "tolerances",
]
VARIANT_KEYS = ["command", "model", "engine_version", "status", "error", "note", "profiles"]
METRIC_ORDER = [
    "completed",
    "failed",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "total_token_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
]
SUMMARY_KEYS = [
    "schema",
    "hardware",
    "model",
    "source",
    "kpis",
    "baseline",
    "optimized",
    "cases",
    "steps",
]

# Printed label of a `vllm bench serve` result line -> (--save-result key, type).
LABELS: dict[str, tuple[str, type]] = {
    "Successful requests": ("completed", int),
    "Failed requests": ("failed", int),
    "Benchmark duration (s)": ("duration", float),
    "Total input tokens": ("total_input_tokens", int),
    "Total generated tokens": ("total_output_tokens", int),
    "Request throughput (req/s)": ("request_throughput", float),
    "Output token throughput (tok/s)": ("output_throughput", float),
    "Peak output token throughput (tok/s)": ("max_output_tokens_per_s", float),
    "Peak concurrent requests": ("max_concurrent_requests", int),
    "Total Token throughput (tok/s)": ("total_token_throughput", float),
    "Mean TTFT (ms)": ("mean_ttft_ms", float),
    "Median TTFT (ms)": ("median_ttft_ms", float),
    "P99 TTFT (ms)": ("p99_ttft_ms", float),
    "Mean TPOT (ms)": ("mean_tpot_ms", float),
    "Median TPOT (ms)": ("median_tpot_ms", float),
    "P99 TPOT (ms)": ("p99_tpot_ms", float),
    "Mean ITL (ms)": ("mean_itl_ms", float),
    "Median ITL (ms)": ("median_itl_ms", float),
    "P99 ITL (ms)": ("p99_itl_ms", float),
}
CONCURRENCY_LABEL = "Maximum request concurrency"

# How each engine's serving command starts -> the engine key (file name) it belongs to.
COMMAND_PREFIXES = {
    "vllm serve ": "vllm",
    "python3 -m sglang.launch_server ": "sglang",
    "trtllm-serve ": "trtllm",
    "mindie serve ": "mindie",
}
# Engine names in the documents' エンジンのバージョン list -> engine key.
VERSION_NAMES = {
    "vLLM": "vllm",
    "vLLM-Ascend": "vllm",
    "SGLang": "sglang",
    "TensorRT-LLM": "trtllm",
    "MindIE": "mindie",
}
# The 結論 table's case labels, in the documents' order.
CASE_LABELS = (
    "ShareGPT",
    "短いプロンプト",
    "中程度のプロンプト",
    "長いプロンプト",
    "非常に長いプロンプト",
)

BLOCK_START = re.compile(r"^=+ Serving Benchmark Result =+$")
BLOCK_END = re.compile(r"^=+$")
FIGURE = re.compile(r"^(?P<label>[^:]+):\s+(?P<value>-?\d+(?:\.\d+)?)$")
RANDOM_CASE = re.compile(r"^# random (?P<size>\d+)(?P<k>K?) input$")
SHAREGPT_CASE = re.compile(r"^# ShareGPT batch size (?P<n>\d+)$")
OPTION_COMMENT = re.compile(r"^# (?P<option>--[\w-]+)=(?P<value>\S+)$")
LINE_NUMBER = re.compile(r"^\d+\t")


# --------------------------------------------------------------------------- the YAML files


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def engine_files() -> Iterator[Path]:
    for folder in EXPECTED_FILES:
        for path in sorted((BASELINES / folder).glob("*.yaml")):
            if path.name != "summary.yaml":
                yield path


def entries(document: dict[str, Any]) -> Iterator[tuple[str | None, str, dict[str, Any]]]:
    """(variant or None, profile name, entry) for every measured profile of one file."""
    for name, entry in document["profiles"].items():
        yield None, name, entry
    for variant_name, variant in document["variants"].items():
        for name, entry in (variant.get("profiles") or {}).items():
            yield variant_name, name, entry


def lookup(folder: str, ref: dict[str, Any], profile: str) -> dict[str, Any]:
    """The profile entry a summary.yaml reference points at."""
    document = load(BASELINES / folder / ref["file"])
    holder = document if ref["variant"] is None else document["variants"][ref["variant"]]
    entry: dict[str, Any] = holder["profiles"][profile]
    return entry


def test_the_seed_baseline_folders_hold_exactly_the_transcribed_files() -> None:
    for folder, names in EXPECTED_FILES.items():
        assert {p.name for p in (BASELINES / folder).glob("*.yaml")} == names, folder


@pytest.mark.parametrize("path", list(engine_files()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_baseline_file_follows_the_schema(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    # Plain block style, no anchors or aliases: every entry reads on its own in a review.
    tokens = list(yaml.scan(text))
    assert not [t for t in tokens if isinstance(t, (yaml.AnchorToken, yaml.AliasToken))]
    flow = (yaml.FlowMappingStartToken, yaml.FlowSequenceStartToken)
    flow_tokens = [t for t in tokens if isinstance(t, flow)]
    # The only flow collection allowed is an empty `variants: {}` / `profiles: {}`.
    assert all(text[t.start_mark.index : t.start_mark.index + 2] == "{}" for t in flow_tokens)

    document = load(path)
    assert list(document) == TOP_KEYS
    assert document["schema"] == 1
    assert document["hardware"] == path.parent.parent.name
    assert document["engine"] == path.stem
    assert document["model"].split("/")[-1].lower() == path.parent.name
    assert isinstance(document["source"], str)
    assert any(seed in document["source"] for seed in DOCUMENTS)

    profiles = builtin_profiles()
    for variant in document["variants"].values():
        keys = list(variant)
        assert keys == [k for k in VARIANT_KEYS if k in keys]
        assert {"command", "model", "engine_version", "status", "error"} <= set(keys)
        assert variant["status"] in ("ok", "failed")
        if variant["status"] == "failed":
            assert isinstance(variant["error"], str)
            assert not variant.get("profiles")
        else:
            assert variant["error"] is None
            assert isinstance(variant.get("profiles"), dict)
    for variant_name, name, entry in entries(document):
        where = f"{path.name} {variant_name or 'profiles'}.{name}"
        assert list(entry) == ENTRY_KEYS, where
        assert entry["status"] == "ok", where
        assert entry["error"] is None, where
        # The documents carry no date; null says "unknown", the source names the document.
        assert entry["recorded"] is None, where
        assert entry["workload"] == profiles[name].workload(), where
        keys = list(entry["metrics"])
        assert keys == [k for k in METRIC_ORDER if k in keys], where
        assert entry["tolerances"] == DEFAULT_TOLERANCES, where
        if variant_name is not None:
            variant = document["variants"][variant_name]
            assert entry["engine_version"] == variant["engine_version"], where
            assert entry["command"] == variant["command"], where


# --------------------------------------------------------------------------- the seed documents


@dataclass
class Measurement:
    seed: str
    engine: str
    command: str
    case: str
    figures: dict[str, int | float]
    max_concurrency: int | None


@dataclass
class Configuration:
    command: str
    engine: str
    in_results: bool = False
    blocks: list[Measurement] = field(default_factory=list)
    error: str | None = None


@dataclass
class Seed:
    name: str
    versions: dict[str, str]
    configurations: list[Configuration]
    conclusion: dict[str, dict[str, Any]]
    steps: list[tuple[str, str]]
    recommended: str

    @property
    def measurements(self) -> list[Measurement]:
        return [m for c in self.configurations for m in c.blocks]

    @property
    def failures(self) -> list[Configuration]:
        return [c for c in self.configurations if c.error is not None]


def clean(raw: str) -> str:
    """A text line without the code listing's line number and backticks."""
    line = LINE_NUMBER.sub("", raw.strip()).strip()
    if line.startswith("`") and line.endswith("`"):
        line = line[1:-1]
    return line.strip()


def engine_of(line: str) -> str | None:
    for prefix, engine in COMMAND_PREFIXES.items():
        if line.startswith(prefix):
            return engine
    return None


def number(text: str, kind: type) -> int | float:
    if kind is int:
        value = Decimal(text)
        assert value == value.to_integral_value(), f"{text} printed for a count"
        return int(value)
    return float(text)


def case_of(comment: str | None, figures: dict[str, int | float], concurrency: int | None) -> str:
    """The built-in profile a block measured, from the comment above it and its own figures."""
    # The documents measured single runs; a sweep of the same shape is not one of them.
    profiles = {n: p for n, p in builtin_profiles().items() if p.sweep is None}

    def find(**want: Any) -> str:
        found = [
            p.name for p in profiles.values() if all(getattr(p, k) == v for k, v in want.items())
        ]
        assert len(found) == 1, (comment, want, found)
        return found[0]

    match = RANDOM_CASE.match(comment or "")
    if match:
        size = int(match["size"]) * (1000 if match["k"] else 1)
        name = find(dataset="random", input_len=size)
    else:
        bs = SHAREGPT_CASE.match(comment or "")
        name = find(dataset="sharegpt", max_concurrency=int(bs["n"]) if bs else None)
    profile: WorkloadProfile = profiles[name]
    assert figures["completed"] == profile.num_prompts, (comment, figures)
    assert concurrency == profile.max_concurrency, (comment, concurrency)
    return name


def parse_block(lines: list[str]) -> tuple[dict[str, int | float], int | None]:
    figures: dict[str, int | float] = {}
    concurrency = None
    for line in lines:
        match = FIGURE.match(line)
        if not match:
            assert set(line) <= set("-=") or line.startswith("-"), f"unread line {line!r}"
            continue
        label = match["label"].strip()
        if label == CONCURRENCY_LABEL:
            concurrency = int(match["value"])
            continue
        key, kind = LABELS[label]
        assert key not in figures, f"{label} twice in one block"
        figures[key] = number(match["value"], kind)
    return figures, concurrency


def section(text: str, start: str, end: str) -> str:
    head = text.index(start)
    return text[head : text.index(end, head)]


def parse_conclusion(text: str) -> dict[str, dict[str, Any]]:
    """The 結論 table: per case the printed baseline and optimized KPIs and the change."""
    table = section(text, "最適化前後のベンチマーク結果の比較", "注記")
    # Longest first: 長いプロンプト is also the tail of 非常に長いプロンプト.
    by_length = sorted(CASE_LABELS, key=len, reverse=True)
    label_re = "|".join(re.escape(label) for label in by_length)
    parts = re.split(f"({label_re})", table)
    cases: dict[str, dict[str, Any]] = {}
    for label, body in zip(parts[1::2], parts[2::2], strict=True):
        tps = re.findall(r"合計 TPS: (\d+(?:\.\d+)?)(?: \(([+-]\d+(?:\.\d+)?)%\))?", body)
        tpot = re.findall(r"平均 TPOT\(ms\): (\d+(?:\.\d+)?)", body)
        assert len(tps) == 2, (label, body)
        assert len(tpot) == 2, (label, body)
        assert tps[0][1] == "", label  # the change is printed next to the optimized figure
        assert tps[1][1] != "", label
        cases[label] = {
            "baseline": (float(tps[0][0]), float(tpot[0])),
            "optimized": (float(tps[1][0]), float(tpot[1])),
            "change": float(tps[1][1]),
        }
    assert list(cases) == list(CASE_LABELS)
    return cases


def parse_steps(text: str) -> list[tuple[str, str]]:
    """The 最適化項目の一覧 table: (step label, printed gain) in order."""
    table = section(text, "最適化項目の一覧", "その他のベンチマークケース")
    rows = []
    for raw in table.splitlines():
        match = re.match(r"^(\S+)\s+([+-]\d+(?:\.\d+)?%|-)$", raw.strip())
        if match:
            rows.append((match[1], match[2]))
    return rows


def parse_seed(path: Path) -> Seed:
    text = path.read_text(encoding="utf-8")
    lines = [clean(raw) for raw in text.splitlines()]

    versions = {}
    for line in section(text, "エンジンのバージョン", "ベンチマークデータセット").splitlines():
        match = re.match(r"^(?:•\s*)?([\w-]+):\s*v?(\S+)$", line.strip())
        if match:
            versions[VERSION_NAMES[match[1]]] = match[2]

    configurations: list[Configuration] = []
    current: Configuration | None = None
    comment: str | None = None
    block: list[str] | None = None
    for line in lines:
        if block is not None:
            if BLOCK_END.match(line):
                assert current is not None, "a result block before any serving command"
                figures, concurrency = parse_block(block)
                command = current.command
                option = OPTION_COMMENT.match(comment or "")
                if option:
                    # `# --flag=value` above a block: the printed command with that one setting.
                    pattern = re.escape(option["option"]) + r"=\S+"
                    replaced = f"{option['option']}={option['value']}"
                    assert re.search(pattern, command), (command, comment)
                    command = re.sub(pattern, replaced, command)
                    case = case_of(None, figures, concurrency)
                else:
                    case = case_of(comment, figures, concurrency)
                current.blocks.append(
                    Measurement(path.name, current.engine, command, case, figures, concurrency)
                )
                block, comment = None, None
            else:
                block.append(line)
            continue
        engine = engine_of(line)
        if engine is not None:
            current = Configuration(command=line, engine=engine)
            configurations.append(current)
            comment = None
        elif BLOCK_START.match(line):
            block = []
        elif current is None:
            continue
        elif line.endswith("ベンチマーク結果"):
            current.in_results = True
        elif line.startswith("# ") and current.in_results:
            if RANDOM_CASE.match(line) or SHAREGPT_CASE.match(line) or OPTION_COMMENT.match(line):
                comment = line
            elif not current.blocks and current.error is None:
                # A result section that holds one comment and no block: the run failed.
                current.error = line[2:]

    recommended = [
        c.command
        for c in configurations
        if not c.in_results and text.index(c.command) < text.index("最適化前後")
    ]
    assert len(recommended) == 1, recommended
    return Seed(
        name=path.name,
        versions=versions,
        configurations=[c for c in configurations if c.in_results],
        conclusion=parse_conclusion(text),
        steps=parse_steps(text),
        recommended=recommended[0],
    )


@pytest.fixture(scope="module")
def seeds() -> dict[str, Seed]:
    if not SEEDS.is_dir():
        pytest.skip(
            f"the seed documents are not here: expected the folder shared/seeds beside the "
            f"repository ({SEEDS}); the transcription cannot be checked without them"
        )
    return {name: parse_seed(SEEDS / name) for name in DOCUMENTS}


def test_the_parser_reads_every_block_of_the_documents(seeds: dict[str, Seed]) -> None:
    # A guard on the parser itself: the raw block count must equal what it understood.
    for name, seed in seeds.items():
        text = (SEEDS / name).read_text(encoding="utf-8")
        assert len(seed.measurements) == text.count("Serving Benchmark Result")
    assert len(seeds["000_c56bb875ccb1f1f6.txt"].measurements) == 15
    assert len(seeds["004_6305a32b79b65924.txt"].measurements) == 13


def test_every_block_is_one_profile_entry_with_every_figure(seeds: dict[str, Seed]) -> None:
    profiles = builtin_profiles()
    stored: dict[tuple[str, str, str, str], list[tuple[str | None, dict[str, Any]]]] = {}
    for path in engine_files():
        document = load(path)
        for variant, name, entry in entries(document):
            key = (path.parent.parent.name, path.stem, entry["command"], name)
            stored.setdefault(key, []).append((variant, entry))

    matched = set()
    for seed in seeds.values():
        hardware = DOCUMENTS[seed.name][0]
        for m in seed.measurements:
            key = (hardware, m.engine, m.command, m.case)
            found = stored.get(key, [])
            assert len(found) == 1, f"{seed.name}: block {key} is stored {len(found)} times"
            variant, entry = found[0]
            where = f"{hardware}/{m.engine}.yaml {variant or 'profiles'}.{m.case}"
            assert entry["engine_version"] == seed.versions[m.engine], where
            assert entry["workload"] == profiles[m.case].workload(), where
            assert entry["workload"]["max_concurrency"] == m.max_concurrency, where
            metrics = entry["metrics"]
            assert set(metrics) == set(m.figures), where
            for metric, printed in m.figures.items():
                value = metrics[metric]
                assert type(value) is type(printed), f"{where} {metric}: {value!r} vs {printed!r}"
                assert value == printed, f"{where} {metric}: stored {value!r}, printed {printed!r}"
            matched.add(key)
    # ...and nothing stored that the documents did not print.
    assert set(stored) == matched


def test_every_failed_configuration_is_recorded_with_its_error(seeds: dict[str, Seed]) -> None:
    failed_in_files = set()
    for path in engine_files():
        for name, variant in load(path)["variants"].items():
            if variant["status"] == "failed":
                failed_in_files.add((path.parent.parent.name, path.stem, name))
    found = set()
    for seed in seeds.values():
        hardware, slug, _ = DOCUMENTS[seed.name]
        for failure in seed.failures:
            document = load(BASELINES / hardware / slug / f"{failure.engine}.yaml")
            hits = [
                (name, v)
                for name, v in document["variants"].items()
                if v["command"] == failure.command
            ]
            assert len(hits) == 1, failure.command
            name, variant = hits[0]
            assert variant["status"] == "failed", name
            assert variant["error"] == failure.error, name
            assert variant["engine_version"] == seed.versions[failure.engine], name
            found.add((hardware, failure.engine, name))
    assert found == failed_in_files
    assert len(found) == 3


def launched_model(command: str) -> str:
    words = command.split()
    if "--model-path" in words:
        return words[words.index("--model-path") + 1]
    return words[2] if words[0] in ("vllm", "mindie") else words[1]


def test_every_variant_names_the_model_its_command_launched(seeds: dict[str, Seed]) -> None:
    commands = {c.command for seed in seeds.values() for c in seed.configurations}
    commands |= {m.command for seed in seeds.values() for m in seed.measurements}
    commands |= {seed.recommended for seed in seeds.values()}
    for path in engine_files():
        for name, variant in load(path)["variants"].items():
            assert variant["command"] in commands, f"{path} {name}: not a printed command"
            launched = launched_model(variant["command"])
            model = variant["model"]
            assert model == launched or model.endswith("/" + launched), (path, name)


def test_the_optimized_configuration_is_the_documents_recommendation(
    seeds: dict[str, Seed],
) -> None:
    for seed in seeds.values():
        hardware, slug, _ = DOCUMENTS[seed.name]
        summary = load(BASELINES / hardware / slug / "summary.yaml")
        target = summary["optimized"]
        variant = load(BASELINES / hardware / slug / target["file"])["variants"][target["variant"]]
        assert target["variant"] == "optimized"
        assert target["command"] == variant["command"] == seed.recommended
        assert variant["status"] == "ok"
        baseline = summary["baseline"]
        assert baseline == {"file": "vllm.yaml", "variant": None}


def test_literal_figures_read_as_documentation() -> None:
    a100 = BASELINES / "a100" / "qwen3-32b"
    vllm = load(a100 / "vllm.yaml")
    sharegpt = vllm["profiles"]["sharegpt"]
    assert sharegpt["command"] == "vllm serve Qwen/Qwen3-32B --max-model-len 32768"
    assert sharegpt["metrics"]["total_token_throughput"] == 1730.98
    assert sharegpt["metrics"]["mean_tpot_ms"] == 149.67
    assert sharegpt["metrics"]["max_concurrent_requests"] == 1000
    trtllm = load(a100 / "trtllm.yaml")
    assert trtllm["profiles"]["sharegpt"]["metrics"]["total_token_throughput"] == 2054.21
    assert trtllm["profiles"]["sharegpt"]["metrics"]["mean_tpot_ms"] == 89.01
    assert trtllm["variants"]["fp8"]["error"] == (
        "RuntimeError: Unsupported SM version for FP8 block scaling GEMM"
    )
    assert trtllm["variants"]["awq"]["error"] == "KeyError: 'weight'"
    # The document's slip: its max-batch-tokens step launched the 14B model.
    assert trtllm["variants"]["max-num-tokens-16384"]["model"] == "Qwen/Qwen3-14B"
    optimized = trtllm["variants"]["optimized"]["profiles"]
    assert optimized["very-long"]["metrics"]["total_token_throughput"] == 1580.36
    assert (
        load(a100 / "sglang.yaml")["profiles"]["sharegpt"]["metrics"]["total_token_throughput"]
        == 1398.38
    )

    ascend = BASELINES / "910b" / "qwen3-30b-a3b"
    vllm_ascend = load(ascend / "vllm.yaml")["profiles"]
    assert vllm_ascend["sharegpt"]["command"] == "vllm serve Qwen/Qwen3-30B-A3B -tp 2"
    assert vllm_ascend["sharegpt"]["metrics"]["total_token_throughput"] == 1227.19
    assert vllm_ascend["sharegpt-bs4"]["workload"]["max_concurrency"] == 4
    assert vllm_ascend["sharegpt-bs4"]["metrics"]["max_concurrent_requests"] == 7
    mindie = load(ascend / "mindie.yaml")
    assert mindie["profiles"]["sharegpt"]["metrics"]["total_token_throughput"] == 4712.47
    assert mindie["variants"]["prefix-caching"]["status"] == "failed"
    # The document's slip: its quantization step launched an 8B model.
    assert mindie["variants"]["w8a8"]["model"] == "vllm-ascend/Qwen3-8B-W8A8"


# --------------------------------------------------------------------------- summary tables


def percent(new: float, old: float) -> Decimal:
    """The change as the documents print it: one decimal, half rounded up."""
    change = (Decimal(repr(new)) - Decimal(repr(old))) / Decimal(repr(old)) * 100
    return change.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)


@pytest.mark.parametrize("seed_name", list(DOCUMENTS))
def test_summary_follows_its_schema(seed_name: str) -> None:
    hardware, slug, model = DOCUMENTS[seed_name]
    summary = load(BASELINES / hardware / slug / "summary.yaml")
    assert list(summary) == SUMMARY_KEYS
    assert (summary["schema"], summary["hardware"], summary["model"]) == (1, hardware, model)
    assert seed_name in summary["source"]
    assert summary["kpis"] == ["total_token_throughput", "mean_tpot_ms"]
    for case in summary["cases"].values():
        assert list(case) == ["label", "baseline", "optimized", "printed_change_pct", "errata"]
    for step in summary["steps"]:
        assert list(step) == [
            "name",
            "label",
            "printed_gain",
            "gain_pct",
            "command",
            "adopted",
            "tried",
        ]


@pytest.mark.parametrize("seed_name", list(DOCUMENTS))
def test_summary_table_is_the_documents_and_reproduces_from_the_baselines(
    seeds: dict[str, Seed], seed_name: str
) -> None:
    seed = seeds[seed_name]
    hardware, slug, _ = DOCUMENTS[seed_name]
    folder = f"{hardware}/{slug}"
    summary = load(BASELINES / folder / "summary.yaml")
    cases = summary["cases"]
    assert [case["label"] for case in cases.values()] == list(seed.conclusion)
    for name, case in cases.items():
        printed = seed.conclusion[case["label"]]
        errata = {e["field"]: e for e in case["errata"]}
        assert case["printed_change_pct"] == printed["change"], name
        stored = {}
        for side in ("baseline", "optimized"):
            ref = case[side]
            assert (ref["total_token_throughput"], ref["mean_tpot_ms"]) == printed[side], name
            metrics = lookup(folder, ref, ref["profile"])["metrics"]
            assert ref["profile"] == name
            stored[side] = metrics
            for kpi in summary["kpis"]:
                fix = errata.get(f"{side}.{kpi}")
                if fix is None:
                    assert metrics[kpi] == ref[kpi], f"{name} {side}.{kpi}"
                else:
                    # The table misprints a figure: the block holds the right one.
                    assert fix["printed"] == ref[kpi] != metrics[kpi] == fix["correct"], name
        change = percent(
            stored["optimized"]["total_token_throughput"],
            stored["baseline"]["total_token_throughput"],
        )
        fix = errata.get("change_pct")
        if fix is None:
            assert change == Decimal(repr(case["printed_change_pct"])), name
        else:
            # The document computed this one wrong; the erratum holds the right value.
            assert Decimal(repr(fix["printed"])) == Decimal(repr(case["printed_change_pct"]))
            assert change == Decimal(repr(fix["correct"])) != Decimal(repr(fix["printed"]))


@pytest.mark.parametrize("seed_name", list(DOCUMENTS))
def test_summary_steps_are_the_documents_and_reproduce_from_the_baselines(
    seeds: dict[str, Seed], seed_name: str
) -> None:
    seed = seeds[seed_name]
    hardware, slug, _ = DOCUMENTS[seed_name]
    folder = f"{hardware}/{slug}"
    summary = load(BASELINES / folder / "summary.yaml")
    steps = summary["steps"]
    assert [(s["label"], s["printed_gain"]) for s in steps] == seed.steps

    def sharegpt_tps(ref: dict[str, Any]) -> float:
        value: float = lookup(folder, ref, "sharegpt")["metrics"]["total_token_throughput"]
        return value

    baseline = sharegpt_tps(summary["baseline"])
    winner: dict[str, Any] | None = None
    for step in steps:
        tried = step["tried"]
        assert tried, step["name"]
        for ref in tried:
            document = load(BASELINES / folder / ref["file"])
            if ref["variant"] is not None:
                assert ref["variant"] in document["variants"], ref
        if step["printed_gain"] == "-":
            # Nothing adopted: every configuration tried that ran stayed below the winner.
            assert step["gain_pct"] is None
            assert step["adopted"] is None
            assert step["command"] is None
            assert winner is not None
            for ref in tried:
                document = load(BASELINES / folder / ref["file"])
                variant = document["variants"][ref["variant"]]
                if variant["status"] == "ok":
                    assert sharegpt_tps(ref) < sharegpt_tps(winner), (step["name"], ref)
            continue
        assert step["printed_gain"] == f"{step['gain_pct']:+}%"
        adopted = step["adopted"]
        assert adopted in tried
        assert lookup(folder, adopted, "sharegpt")["command"] == step["command"]
        assert percent(sharegpt_tps(adopted), baseline) == Decimal(repr(step["gain_pct"]))
        assert all(sharegpt_tps(ref) <= sharegpt_tps(adopted) for ref in tried)
        winner = adopted
