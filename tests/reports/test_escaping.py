"""Strings from servers and shared files reach the job summary, the HTML plots and the
terminal as text: no link, image, tag or escape sequence of theirs survives."""

from __future__ import annotations

import dataclasses
import re

import pytest

from pytest_llmperf.escape import md_code, md_text, printable
from pytest_llmperf.gate.ledger import Ledger
from pytest_llmperf.models import Outcome, Verdict
from pytest_llmperf.reports.markdown import session_markdown
from pytest_llmperf.reports.tables import SessionView
from tests.reports.factory import result

HOSTILE = (
    "boom` [click](https://evil.example/x) ![pixel](https://evil.example/p.png) "
    "<img src=x onerror=alert(1)> | cell \x1b[31mred\x1b[0m\x07"
)


def _hostile_ledger() -> Ledger:
    measured = result("vllm", "short", seed=1)
    failing = dataclasses.replace(
        measured,
        variant="<a href='https://evil.example'>tuned</a>",
        errors=(HOSTILE,),
        verdict=Verdict(Outcome.REQUESTS_FAILED, notes=(f"first reasons: {HOSTILE}",)),
    )
    book = Ledger()
    book.add(failing)
    book.failed_starts["[x](https://evil.example)"] = HOSTILE
    return book


def _live_markdown(text: str) -> list[str]:
    """Links, images and raw tags that a Markdown renderer would make live: outside code
    spans, not preceded by a backslash."""
    outside = re.sub(r"(`+).*?\1", "", text)
    ours = re.sub(r"</?(details|summary)>", "", outside)  # the folding the summary uses
    return re.findall(r"(?<!\\)\]\(|(?<!\\)<[a-z]", ours)


def test_the_job_summary_shows_server_text_as_text() -> None:
    text = session_markdown(SessionView(_hostile_ledger(), "cpu"))
    assert "evil.example" in text  # shown, not dropped
    assert _live_markdown(text) == []
    assert "\x1b" not in text
    assert "\x07" not in text
    table_rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert {line.count(" | ") for line in table_rows} == {len(table_rows[0].split(" | ")) - 1}


@pytest.mark.parametrize("text", [HOSTILE, "`", "a``b", "``x``"])
def test_a_code_span_cannot_be_closed_from_inside(text: str) -> None:
    span = md_code(text)
    fence = re.match(r"`+", span)
    assert fence is not None
    inner = span[len(fence.group()) : -len(fence.group())]
    assert span.endswith(fence.group())
    assert fence.group() not in inner  # no run as long as the fence inside


def test_markdown_text_and_terminal_text() -> None:
    assert md_text("[a](b) ![c](d) <b>") == r"\[a\](b) \!\[c\](d) \<b\>"
    assert printable("ok\x1b[2J\x1b]0;title\x07 done\tx\n") == "ok done\tx\n"


def test_plot_labels_from_a_shared_history_are_escaped() -> None:
    pytest.importorskip("plotly")
    from pytest_llmperf.reports.html_report import latency_figure, trend_figure

    hostile = "<a href='https://evil.example'>v</a>%{y}"
    items = [
        {"timestamp": "2025-01-01T00:00:00", "variant": hostile, "profile": "short",
         "hardware": "cpu", "git_commit": "<b>abc</b>", "metrics": {"mean_tpot_ms": 1.0}},
    ]  # fmt: skip
    figure = trend_figure(items)
    for trace in figure.data:
        assert "<a" not in trace.name
        assert hostile not in (trace.hovertemplate or "")
        assert all("<b>" not in t for t in trace.text)
    measured = dataclasses.replace(result("vllm", "short", seed=1), variant=hostile)
    boxes = latency_figure("short", [measured], {hostile: "#000"})
    assert all("<a" not in trace.name for trace in boxes.data)
