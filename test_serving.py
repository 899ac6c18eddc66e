"""The ready-made regression suite: one test per workload profile (and engine).

pytest --engine=vllm --hardware=cpu            # embedded default, no GPU
pytest --engine=trtllm --hardware=a100 --model Qwen/Qwen3-32B
pytest --engine=vllm --hardware=cpu --update-baselines
"""

from __future__ import annotations

from pytest_llmperf.plugin import LLMPerf


def test_serving(llmperf: LLMPerf) -> None:
    """Serving performance of this profile is within tolerance of its baseline."""
    llmperf.check()
