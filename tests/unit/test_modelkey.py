"""Each model's baselines in a folder of its own, and a file of another model refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.errors import BaselineError
from pytest_llmperf.gate import store
from pytest_llmperf.gate.loop import GateRequest, run_gate
from pytest_llmperf.gate.modelkey import model_slug
from pytest_llmperf.measure.profiles import builtin_profiles
from pytest_llmperf.measure.run import Measurement
from tests.support.targets import unreachable_target

SHIPPED = Path(__file__).resolve().parents[2] / "baselines"


@pytest.mark.parametrize(
    ("hardware", "model", "engine", "folder"),
    [
        ("a100", "Qwen/Qwen3-32B", "vllm", "qwen3-32b"),
        ("a100", "Qwen/Qwen3-32B", "trtllm", "qwen3-32b"),
        ("910b", "Qwen/Qwen3-30B-A3B", "mindie", "qwen3-30b-a3b"),
        ("cpu", "tiny-qwen3", "vllm", "tiny-qwen3"),
    ],
)
def test_shipped_baselines_are_found_under_their_readable_names(
    hardware: str, model: str, engine: str, folder: str
) -> None:
    path = store.baseline_path(SHIPPED, hardware, model, engine)
    assert path == SHIPPED / hardware / folder / f"{engine}.yaml"
    assert path.is_file()


def test_local_paths_with_the_same_last_folder_get_their_own_baselines() -> None:
    one, two = model_slug("/ckpt/run1/hf"), model_slug("/ckpt/run2/hf")
    assert one != two
    assert one.startswith("hf-")
    assert two.startswith("hf-")
    assert model_slug("/ckpt/run1/hf/") == one  # the same path, however it is written
    assert model_slug("./models/m") == model_slug("models/m/../m")


def _gate_request(root: Path, model: str) -> GateRequest:
    target = unreachable_target(model=model, command="vllm serve")
    profile = builtin_profiles()["short"]
    return GateRequest(
        target=target, profile=profile, hardware="a100", baseline_root=root, update=False
    )


def _never() -> Measurement:
    raise AssertionError("a refused baseline must fail before any load is sent")


def test_a_file_recorded_for_another_model_is_refused(tmp_path: Path) -> None:
    path = store.baseline_path(tmp_path, "a100", "Qwen/Qwen3-32B", "vllm")
    store.record_entry(
        path,
        "short",
        {"status": "ok", "metrics": {"total_token_throughput": 1.0, "mean_tpot_ms": 1.0}},
        header={"hardware": "a100", "model": "Qwen/Qwen3-32B", "engine": "vllm"},
    )
    assert store.baseline_path(tmp_path, "a100", "x/qwen3-32b", "vllm") == path
    with pytest.raises(BaselineError, match=r"records 'Qwen/Qwen3-32B', this run serves"):
        run_gate(_gate_request(tmp_path, "x/qwen3-32b"), _never)
    # The hub spells ids in any case: the same model passes the check.
    with pytest.raises(AssertionError, match="refused baseline"):
        run_gate(_gate_request(tmp_path, "qwen/qwen3-32b"), _never)


def test_a_local_model_recorded_in_the_old_folder_is_still_found(tmp_path: Path) -> None:
    model = "/ckpt/run1/hf"
    old = tmp_path / "cpu" / "hf" / "vllm.yaml"
    store.record_entry(
        old,
        "short",
        {"status": "ok", "metrics": {"total_token_throughput": 1.0, "mean_tpot_ms": 1.0}},
        header={"hardware": "cpu", "model": model, "engine": "vllm"},
    )
    assert store.baseline_path(tmp_path, "cpu", model, "vllm") == old
    other = store.baseline_path(tmp_path, "cpu", "/ckpt/run2/hf", "vllm")
    assert other == tmp_path / "cpu" / model_slug("/ckpt/run2/hf") / "vllm.yaml"
