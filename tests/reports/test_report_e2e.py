"""Acceptance 2: an end-to-end run on the CPU server writes the JSON, Markdown and HTML, and the
HTML's plots render in headless Chromium.

The session runs pytest in a subprocess against the shared real vLLM server (an external
endpoint, so no second server starts), as a variants run: two configurations that reach the
server and one whose endpoint nothing listens on, which fails to start. The first session
records the baselines, the second compares with them and writes every report file; both append
to one history file, so the report has a trend with two points per line.

Chromium is Debian's ``chromium`` package; the test is skipped where it is absent. With
``LLMPERF_SCREENSHOT=PATH`` the screenshot is also copied there (docs/images/report.png is made
that way).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port
from tests.support.files import widen_tolerances

# medium (2000 tokens in, 100 out): enough output tokens per request for TPOT and ITL to have a
# shape; short's 4 tokens often arrive in one chunk from a busy server.
PROFILE = "medium"
PLOTS = (f"latency-{PROFILE}", "baseline-0", "baseline-1", f"throughput-{PROFILE}", "trend")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)


@dataclass(frozen=True)
class Session:
    folder: Path
    first: Any  # pytester.RunResult of the recording session
    second: Any  # ... and of the comparing session, which wrote the reports

    @property
    def html(self) -> Path:
        return self.folder / "out" / "report.html"


def _write_suite(folder: Path, base_url: str, model: Path) -> list[str]:
    """A regression suite in ``folder`` and the arguments that run it as a variants run."""
    (folder / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n", encoding="utf-8"
    )
    (folder / "test_serving.py").write_text(
        "def test_serving(llmperf):\n    llmperf.check()\n", encoding="utf-8"
    )
    (folder / "variants.yaml").write_text(
        "variants:\n"
        f"  - {{name: tiny, engine: external, endpoint: '{base_url}'}}\n"
        f"  - {{name: tiny-again, engine: external, endpoint: '{base_url}'}}\n"
        f"  - {{name: unreachable, engine: external, endpoint: 'http://127.0.0.1:{free_port()}'}}\n",
        encoding="utf-8",
    )
    return [
        "--llmperf-variants=variants.yaml",
        f"--model={model}",
        "--hardware=cpu",
        f"--llmperf-profile={PROFILE}",
        "--num-prompts=24",  # progress lines start at 20 requests
        "--llmperf-warmups=2",
        "--llmperf-startup-timeout=3",
        "--baseline-dir=baselines",
        "--llmperf-history=out/history.jsonl",
        "-p",
        "no:cacheprovider",
    ]


@dataclass(frozen=True)
class _Done:
    ret: int
    out: str


def _run(folder: Path, args: list[str]) -> _Done:
    env = {**os.environ}
    env.pop("GITHUB_STEP_SUMMARY", None)  # the option names the Markdown file here
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return _Done(done.returncode, done.stdout + done.stderr)


@pytest.fixture(scope="module")
def session(
    vllm_server: Any, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Session:
    """Two pytest sessions over one folder: the first records, the second compares and
    writes every report (shared by the tests below: a run takes seconds, not milliseconds)."""
    folder = tmp_path_factory.mktemp("report-e2e")
    args = _write_suite(folder, vllm_server.base_url, tiny_model_dir)
    first = _run(folder, [*args, "--update-baselines"])
    for recorded in (folder / "baselines").rglob("external.yaml"):
        # The compare must pass: its verdicts are checked. Throughput alone is gated: real
        # vLLM on two cores sometimes sends a whole answer in one chunk, and mean TPOT then
        # moves by thousands of percent (docs/noise.md).
        widen_tolerances(recorded, metrics=("total_token_throughput",))
    second = _run(
        folder,
        [
            *args,
            "-v",
            "--llmperf-json=out/results.json",
            "--llmperf-summary=out/summary.md",
            "--llmperf-html=out/report.html",
        ],
    )
    return Session(folder, first, second)


@pytest.mark.e2e
def test_end_to_end_run_writes_json_markdown_and_html(session: Session) -> None:
    first, second = session.first, session.second
    # The unreachable variant fails its tests; the others record, then compare.
    assert first.ret == 1, first.out
    assert f"tiny/{PROFILE}: " in first.out
    assert "-> recorded" in first.out
    assert second.ret == 1, second.out
    assert "unreachable: failed to start: --endpoint http://127.0.0.1:" in second.out
    assert f"llmperf {PROFILE}: 24/24 requests done" in second.out, second.out  # progress
    assert "============ Serving Benchmark Result ============" in second.out  # -v
    assert "comparison (total token throughput and mean TPOT against tiny):" in second.out

    out = session.folder / "out"
    document = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert [r["variant"] for r in document["results"]] == ["tiny", "tiny-again"]
    assert set(document["failed_starts"]) == {"unreachable"}
    for result in document["results"]:
        assert result["metrics"]["completed"] == 24
        assert result["outcome"] == "pass", result["notes"]  # compared, not recorded
        gated = [c for c in result["comparisons"] if c["tolerance_pct"] is not None]
        assert [c["metric"] for c in gated] == ["total_token_throughput"]
        assert {c["status"] for c in gated} == {"pass"}
        assert result["hardware"] == "cpu"
        assert result["command"].startswith("(external) http://127.0.0.1:")
        assert len(result["series"]["ttft_ms"]) == 24
    assert document["plugin_version"]

    # A named variant records under variants.<name> of the engine's baseline file.
    recorded = list((session.folder / "baselines" / "cpu").glob("*/external.yaml"))
    assert len(recorded) == 1
    text = recorded[0].read_text(encoding="utf-8")
    assert "variants:\n  tiny:\n" in text
    assert "  tiny-again:\n" in text

    markdown = (out / "summary.md").read_text(encoding="utf-8")
    assert markdown.startswith("## pytest-llmperf: cpu, 2 profiles")
    assert f"| tiny | {PROFILE} |" in markdown
    assert f"| {PROFILE} | unreachable | failed | --endpoint http://127.0.0.1:" in markdown

    lines = (out / "history.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4  # two sessions, two measured variants each
    page = session.html.read_text(encoding="utf-8")
    for name in PLOTS:
        assert f'data-plot="{name}"' in page, name


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}  # fmt: skip


class _PlotFinder(HTMLParser):
    """Per plot container of the rendered DOM: plotly's SVG roots and the data marks drawn."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str | None] = []  # the plot each open element belongs to
        self.plots: dict[str, dict[str, int]] = {}

    def _inside(self) -> str | None:
        return self.stack[-1] if self.stack else None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._count(tag, dict(attrs))
        if tag in VOID:
            return
        attr = dict(attrs)
        plot = attr.get("data-plot") if "llmperf-plot" in (attr.get("class") or "") else None
        if plot:
            self.plots[plot] = {"main-svg": 0, "marks": 0}
        self.stack.append(plot or self._inside())

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._count(tag, dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        if tag not in VOID and self.stack:
            self.stack.pop()

    def _count(self, tag: str, attr: dict[str, str | None]) -> None:
        plot = self._inside()
        if plot is None:
            return
        classes = set((attr.get("class") or "").split())
        if tag == "svg" and "main-svg" in classes:
            self.plots[plot]["main-svg"] += 1
        # Data, not axes: box bodies, bars and trace lines are <path d="M..."> of these classes.
        if tag == "path" and (attr.get("d") or "").startswith("M") and classes & DATA_MARKS:
            self.plots[plot]["marks"] += 1


DATA_MARKS = {"box", "js-line", "point"}


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium)")
    return found


def _browse(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.e2e
def test_report_plots_render_in_headless_chromium(session: Session, tmp_path: Path) -> None:
    binary = _chromium()
    url = session.html.resolve().as_uri()
    dom = _browse(
        binary, tmp_path / "profile-dom", "--virtual-time-budget=15000", "--dump-dom", url
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    finder = _PlotFinder()
    finder.feed(dom.stdout)
    assert set(finder.plots) == set(PLOTS), finder.plots
    for name, counts in finder.plots.items():
        assert counts["main-svg"] >= 1, (name, counts)  # plotly drew its SVG
        assert counts["marks"] >= 1, (name, counts)  # ... with data in it

    shot = tmp_path / "report.png"
    taken = _browse(
        binary,
        tmp_path / "profile-shot",
        "--window-size=1280,2900",
        "--virtual-time-budget=15000",
        f"--screenshot={shot}",
        url,
    )
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert _png_size(shot) == (1280, 2900)
    assert shot.stat().st_size > 50_000  # a page of plots, not a blank image
    copy_to = os.environ.get("LLMPERF_SCREENSHOT")
    if copy_to:
        Path(copy_to).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, copy_to)
