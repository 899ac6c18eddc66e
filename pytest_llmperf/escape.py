"""Escape text the plugin did not write itself for the medium it lands in.

Server error messages, engine log lines, and names read from a shared history or variants
file are not ours: a hostile endpoint or file could otherwise put links and images into the
CI job summary, HTML into the report's plots, or terminal escape sequences into the CI log.
"""

from __future__ import annotations

import html
import re

# ANSI escape sequences (CSI ... final byte, OSC ... BEL/ST), then any other control
# character but tab and newline.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Characters that start Markdown constructs that leave the text: links and images, code
# spans, raw HTML, table cells. Emphasis is left alone: it cannot link anywhere, and metric
# names keep their underscores readable in the raw file.
_MARKDOWN_ACTIVE = re.compile(r"([\\`\[\]<>!|])")


def printable(text: str) -> str:
    """``text`` without terminal escape sequences or control characters (tab, newline kept)."""
    return _CONTROL.sub("", _ANSI.sub("", text))


def md_text(text: str) -> str:
    """Plain text for a Markdown line or table cell: every active character escaped, one
    line."""
    flat = " ".join(printable(text).split())
    return _MARKDOWN_ACTIVE.sub(r"\\\1", flat)


def md_code(text: str) -> str:
    """``text`` as a Markdown code span, which no content can end early: the fence is one
    backtick longer than the longest run of backticks inside."""
    flat = " ".join(printable(text).split())
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def plot_text(text: str) -> str:
    """Text for a plotly trace name, title or hover label: plotly renders a subset of HTML
    (links, bold, line breaks) there, and shows entities as their characters."""
    return html.escape(printable(text), quote=True)
