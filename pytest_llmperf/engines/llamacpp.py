"""llama.cpp: ``llama-server -m M``.

Unlike the other engines, llama-server listens *before* the model is loaded and answers
``/health`` with 503 ``Loading model`` meanwhile; only 200 means ready. Its default port is
moving (8080 to 9931), which is one more reason the plugin always passes ``--port``.

Its prompt cache lives in the slots (one per parallel sequence): the reset erases each slot with
``POST /slots/{id}?action=erase``, the slots listed by ``GET /slots``. llama-server refuses every
slot action with 501 unless it was started with ``--slot-save-path DIR`` (an existing folder),
so the plan passes one in the config folder unless the engine arguments name their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from pytest_llmperf.engines.base import (
    CacheReset,
    EngineSpec,
    Fetch,
    LaunchPlan,
    LaunchRequest,
    RequestQuirks,
    builtin_metric_names,
)

DEFAULT_EXECUTABLE = "llama-server"
SLOT_SAVE_PATH_FLAG = "--slot-save-path"


def _json(body: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


class LlamaCppEngine(EngineSpec):
    name = "llamacpp"
    display_name = "llama.cpp"
    ready_log_line = "listening on http://"  # "main: server is listening on http://..."
    # No min_tokens. Current builds honour max_completion_tokens too, older ones only
    # max_tokens, which every build takes.
    quirks: ClassVar[RequestQuirks] = RequestQuirks(
        chat_max_tokens_field="max_tokens", supports_ignore_eos=True, supports_min_tokens=False
    )
    # The base rule (only 200 is ready) already treats 503 "Loading model" as not ready.
    version_paths: ClassVar[tuple[str, ...]] = ("/props",)
    version_key: ClassVar[str] = "build_info"  # a build (b6123-abcdef0), not a semver
    cache_reset: ClassVar[CacheReset | None] = CacheReset(
        "POST",
        "/slots/{slot}?action=erase",
        unavailable_hint=f" (llama-server erases slots only when started with "
        f"{SLOT_SAVE_PATH_FLAG})",
    )

    engine_metrics = builtin_metric_names("llamacpp")

    def plan(self, request: LaunchRequest) -> LaunchPlan:
        executable = request.executable or DEFAULT_EXECUTABLE
        slot_args, directories = self._slot_save_path(request)
        head = (executable, "-m", request.model)
        return self.served(request, head, *slot_args, directories=directories)

    @staticmethod
    def _slot_save_path(request: LaunchRequest) -> tuple[tuple[str, ...], tuple[Path, ...]]:
        """``--slot-save-path`` so that slots can be erased, unless the user named one."""
        given = any(a.split("=")[0] == SLOT_SAVE_PATH_FLAG for a in request.engine_args)
        if given or request.config_dir is None:
            return (), ()
        folder = Path(request.config_dir) / "slots"
        return (SLOT_SAVE_PATH_FLAG, str(folder)), (folder,)

    def cache_reset_paths(self, fetch: Fetch) -> list[str]:
        """One erase per slot: ``GET /slots`` lists them; builds that keep that route off
        (older ones without ``--slots``) still report ``total_slots`` in ``/props``."""
        assert self.cache_reset is not None
        status, body = fetch("/slots")
        slots = _json(body) if status == 200 else None
        if isinstance(slots, list):
            ids = [int(s["id"]) for s in slots if isinstance(s, dict) and "id" in s]
        else:
            status, body = fetch("/props")
            props = _json(body) if status == 200 else None
            total = props.get("total_slots") if isinstance(props, dict) else None
            ids = list(range(int(total))) if isinstance(total, int) else []
        return [self.cache_reset.path.format(slot=slot) for slot in ids]
