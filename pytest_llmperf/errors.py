"""The plugin's exceptions: one family, so callers can catch what is ours."""

from __future__ import annotations


class LLMPerfError(Exception):
    """Base of every error the plugin raises on purpose."""


class ConfigError(LLMPerfError):
    """A bad option, ini value, profile or file; the message says how to fix it."""


class ProfileError(ConfigError):
    """A workload profile that is unknown or malformed."""


class BaselineError(ConfigError):
    """A baseline file that cannot be read or has the wrong shape."""


class EngineStartError(LLMPerfError):
    """The engine did not become ready: it exited, timed out, or could not be launched."""


class EngineDiedError(LLMPerfError):
    """The engine exited while the session still needed it."""


class LoadGenError(LLMPerfError):
    """The load generator could not run at all (as opposed to single failed requests)."""
