"""Stand-in for ``python3 -m sglang.launch_server`` (see standin_common for the steering).

What it copies from SGLang: nothing listens while the model loads (connection refused); then
``/v1/models`` and ``/get_model_info`` answer 200 while ``/health`` still answers 503 during
the warm-up; only then ``/health`` turns 200 and the log says the server is fired up. It starts
a detokenizer child and a scheduler that is re-parented away from it. On SIGTERM ``/health``
turns 503, it "drains", then SIGKILLs its process tree and itself (exit -9); the re-parented
scheduler is not in the tree and is left for the process-group kill.

Like later releases it reports its version at ``/server_info`` and keeps ``/get_server_info``
as a deprecated alias. ``/flush_cache`` answers 200 once flushed and 400 while requests run or
wait (the same text either way); ``STANDIN_FLUSH_BUSY=N`` makes the first N flushes find it busy.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import standin_common as sc

VERSION = "0.5.5.post1"


def main() -> None:
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    parser.add_argument("--model-path", "--model", required=True)
    parser.add_argument("--served-model-name")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    args, _unknown = parser.parse_known_args()
    model = args.served_model_name or args.model_path
    sc.record_start(sys.argv)
    sc.log(
        f"server_args=ServerArgs(model_path={args.model_path!r}, host={args.host!r}, "
        f"port={args.port})"
    )
    stubborn = sc.env_flag("STANDIN_STUBBORN_CHILD")
    sc.spawn_child("detokenizer", stubborn=stubborn)
    sc.spawn_orphan("scheduler_TP0", stubborn=stubborn)

    state = {"status": "starting"}

    def on_sigterm(signum: int, frame: object) -> None:
        state["status"] = "stopping"
        sc.event("stopping")
        sc.log("Gracefully exiting... Remaining number of requests 0")
        time.sleep(0.2)
        sc.kill_all(sc.tree_pids(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    signal.signal(signal.SIGTERM, on_sigterm)

    sc.log("Load weight begin.")
    time.sleep(sc.env_float("STANDIN_LOAD_S", 0.5))
    if sc.env_flag("STANDIN_CRASH"):
        # The children are left behind, as when SGLang dies of an exception while loading.
        sc.log("Traceback (most recent call last):")
        sc.fail("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", 1)

    def health(body: object) -> sc.Answer:
        return (200, "") if state["status"] == "up" else (503, "")

    busy_flushes = [int(sc.env_float("STANDIN_FLUSH_BUSY", 0))]

    def flush_cache(body: object) -> sc.Answer:
        text = (
            "Cache flushed.\nPlease check backend logs for more details. (When there are "
            "running or waiting requests, the operation will not be performed.)\n"
        )
        if busy_flushes[0] > 0:
            busy_flushes[0] -= 1
            return 400, text
        return 200, text

    def server_info(body: object) -> sc.Answer:
        return 200, {"version": VERSION, "model_path": args.model_path}

    def deprecated_server_info(body: object) -> sc.Answer:
        sc.log("WARNING: /get_server_info is deprecated; use /server_info")
        return server_info(body)

    sc.serve(
        args.host,
        args.port,
        {
            ("GET", "/health"): health,
            ("GET", "/health_generate"): health,
            ("GET", "/v1/models"): sc.models_answer(model),
            ("GET", "/get_model_info"): lambda body: (200, {"model_path": args.model_path}),
            ("GET", "/server_info"): server_info,
            ("GET", "/get_server_info"): deprecated_server_info,
            ("POST", "/flush_cache"): flush_cache,
            ("GET", "/flush_cache"): flush_cache,
            ("POST", "/v1/chat/completions"): lambda body: sc.chat_answer(body, model, "separate"),
        },
    )
    sc.log(f"Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    time.sleep(sc.env_float("STANDIN_WARMUP_S", 1.0))  # the warm-up /generate
    sc.event("ready")
    state["status"] = "up"
    sc.log("The server is fired up and ready to roll!")
    sc.sleep_forever()


if __name__ == "__main__":
    main()
