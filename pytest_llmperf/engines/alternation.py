"""A and B on a machine that cannot hold both servers: one serves at a time.

``--llmperf-ab-restart``. Before a run on one configuration, the other's server stops (every
process of it, as at the end of a session) and this one's starts again and is waited for;
the run's own warm-ups follow as always. In the A,B,B,A order a switch comes once per pair,
so an experiment of n pairs pays about n restarts: the result says how many and how long
they took. Pairing still cancels the machine's drift, but each run now follows a fresh start
(cold caches, a new CUDA graph capture), which the warm-ups must absorb.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from pytest_llmperf.engines.server import EngineServer

Result = TypeVar("Result")


class OneServerAtATime:
    """Which server is up, and the switches made so far (one per session)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.up: EngineServer | None = None
        self.restarts = 0
        self.seconds = 0.0
        self._clock = clock

    def make_room(self) -> None:
        """Stop the server that is up, before another configuration starts."""
        if self.up is not None:
            self.up.stop()
            self.up = None

    def started(self, server: EngineServer) -> None:
        """``server`` has just been started for the session: it is the one up."""
        self.up = server

    def switch_to(self, server: EngineServer) -> None:
        if self.up is server:
            return
        began = self._clock()
        self.make_room()
        server.restart()
        self.up = server
        self.restarts += 1
        self.seconds += self._clock() - began

    def on(self, server: EngineServer, run: Callable[[], Result]) -> Callable[[], Result]:
        """``run``, on ``server`` once it is the one serving."""

        def switched_run() -> Result:
            self.switch_to(server)
            return run()

        return switched_run
