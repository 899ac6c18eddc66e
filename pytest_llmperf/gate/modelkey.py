"""Which folder of ``baselines/<hardware>/`` holds a model's baselines, and a check that a
file found there is really that model's.

A hub id keeps its readable name (``Qwen/Qwen3-32B`` → ``qwen3-32b``, as the shipped
baselines are laid out). A local path is named by its last component and a short hash of the
path as given: ``/ckpt/run1/hf`` and ``/ckpt/run2/hf`` are different models, and their
baselines must not share ``hf/``. Two hub ids may still share a name (``Qwen/Qwen3-32B`` and
``x/qwen3-32b``): every baseline file records its ``model:``, and a file that names another
model is refused instead of gating one model against another's numbers.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from pytest_llmperf.errors import BaselineError

# org/name or name, as the hub spells model ids; anything else is a path.
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_MAX_NAME = 64  # a folder name stays far below file systems' 255 bytes


def _slug(text: str) -> str:
    # The rule baseline.slug applies to every path component (kept here so this module does
    # not import baseline.py, which imports it).
    last = text.rstrip("/").rsplit("/", 1)[-1].lower()
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", last).strip("-.")
    return cleaned or "unnamed"


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def is_hub_id(model: str) -> bool:
    return bool(_HUB_ID.match(model)) and ".." not in model


def _normal_path(model: str) -> str:
    return os.path.normpath(model.strip()) if model.strip() else ""


def model_slug(model: str) -> str:
    """The folder name of ``model``'s baselines: readable, and distinct for distinct paths."""
    if is_hub_id(model):
        name = _slug(model)
        return name if len(name) <= _MAX_NAME else f"{name[:_MAX_NAME]}-{_short_hash(model)}"
    normal = _normal_path(model)
    return f"{_slug(normal)[:_MAX_NAME]}-{_short_hash(normal)}"


def legacy_slug(model: str) -> str:
    """The folder name before paths were hashed: the last component alone."""
    return _slug(model)


def same_model(recorded: str, model: str) -> bool:
    """Whether a file's ``model:`` names ``model`` (hub ids ignore case, as the hub does)."""
    if is_hub_id(recorded) and is_hub_id(model):
        return recorded.lower() == model.lower()
    return _normal_path(recorded) == _normal_path(model)


def model_folder(root: Path, hardware_folder: str, model: str, engine_file: str) -> Path:
    """``root/hardware/<model slug>/engine.yaml``; for a local path recorded before paths
    were hashed, the old folder while it holds this model's file and the new one does not,
    so that baselines a user recorded keep gating."""
    path = root / hardware_folder / model_slug(model) / engine_file
    legacy = root / hardware_folder / legacy_slug(model) / engine_file
    if path != legacy and not path.exists():
        recorded = _header_model(legacy)
        if recorded is not None and same_model(recorded, model):
            return legacy
    return path


def _header_model(path: Path) -> str | None:
    from pytest_llmperf.gate.store import read_document

    try:
        document = read_document(path)
    except BaselineError:
        return None
    recorded = document.get("model")
    return None if recorded is None else str(recorded)


def check_model(path: Path, model: str) -> None:
    """Refuse a baseline file whose ``model:`` names another model than ``model``."""
    from pytest_llmperf.gate.store import read_document

    recorded = read_document(path).get("model")
    if recorded is None or same_model(str(recorded), model):
        return
    raise BaselineError(
        f"{path}: model: the file records {recorded!r}, this run serves {model!r}; the two "
        f"share the folder name {path.parent.name!r}. Gating one model against another's "
        f"numbers would be meaningless: keep this model's baselines apart with "
        f"--baseline-dir, or move the file away if it is stale"
    )
