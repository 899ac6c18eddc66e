"""Keep credentials out of everything the plugin writes or prints.

Users protect a started engine with ``--engine-args "--api-key $KEY"``, pass ``--hf-token``,
or give an endpoint as ``https://user:token@host/v1``. The engine and the HTTP client need
those values as given; the recorded command of a baseline, the results JSON, the job summary,
the HTML report, the history, start errors and failure messages must not carry them.

Two layers, because a secret reaches text by many roads (an engine echoing its arguments in
its log, a server quoting the credentials it got in an error):

- by position: the value after an option whose name says it holds a secret (``--api-key X``,
  ``--hf-token=X``), and the user-info part of any URL (``scheme://user:pass@``);
- by value: every secret the session knows of (``remember``) is replaced wherever it appears.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from pytest_llmperf.config import Settings

MASK = "***"
# Words of an option or variable name that say its value is a credential. "tokens" (a count)
# and "tokenizer" are not among them: only whole words count.
_SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential", "auth"}
)
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@'\"]+@")
# Shorter values are too likely to occur by chance (a port, a word) to be replaced by value;
# an option of that kind is still masked by position.
_MIN_REMEMBERED = 6

_known: set[str] = set()


def is_secret_name(name: str) -> bool:
    """Whether an option (``--api-key``) or variable (``HF_TOKEN``) name holds a credential."""
    words = re.split(r"[-_.]+", name.lstrip("-").lower())
    return any(word in _SECRET_WORDS for word in words)


def remember(*secrets: str | None) -> None:
    """Add values to mask wherever they appear, for the rest of the process."""
    for secret in secrets:
        if secret and len(secret.strip()) >= _MIN_REMEMBERED:
            _known.add(secret.strip())


def forget_all() -> None:
    """Drop every remembered value (tests that run several sessions in one process)."""
    _known.clear()


def url(text: str) -> str:
    """Every ``scheme://user:pass@`` in ``text`` becomes ``scheme://***@``."""
    return _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)


def text(value: str) -> str:
    """``value`` with remembered secrets and URL user-info masked."""
    for secret in sorted(_known, key=len, reverse=True):
        value = value.replace(secret, MASK)
    return url(value)


def argv(args: Sequence[str]) -> list[str]:
    """The argv as it may be shown: values of secret-bearing options masked.

    ``--api-key X``, ``--api-key=X`` and ``--api-key X Y`` (vLLM takes several keys) all mask
    every value up to the next option; the argv an engine receives is never this one.
    """
    shown: list[str] = []
    masking = nested = False
    for arg in args:
        if nested:  # the value of --engine-args, whatever it starts with
            shown.append(_nested(arg))
            nested = False
        elif arg.startswith("-"):
            name, equals, value = arg.partition("=")
            masking = is_secret_name(name) and not equals
            nested = name.endswith("engine-args") and not equals
            if equals and is_secret_name(name):
                shown.append(f"{name}={MASK}")
            elif equals and name.endswith("engine-args"):
                shown.append(f"{name}={_nested(value)}")
            else:
                shown.append(text(arg))
        elif masking:
            shown.append(MASK)
        else:
            shown.append(text(arg))
    return shown


def _nested(value: str) -> str:
    """The value of ``--engine-args``, itself a command line: masked inside."""
    try:
        return command(shlex.split(value))
    except ValueError:
        return text(value)


def command(args: Sequence[str]) -> str:
    """A shell-quoted command line with its secrets masked."""
    return shlex.join(argv(args))


def secrets_in_args(args: Iterable[str]) -> list[str]:
    """The values the argv carries in secret-bearing options (and in URL user-info)."""
    found: list[str] = []
    masking = False
    for arg in args:
        name, equals, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
        if name:
            masking = is_secret_name(name) and not equals
            if equals and is_secret_name(name):
                found.append(value)
        elif masking:
            found.append(arg)
        found.extend(_userinfo(value))
    return found


def _userinfo(value: str) -> list[str]:
    """The user-info of a URL (``user:pass``) and its password, raw and decoded."""
    try:
        parts = urlsplit(value)
    except ValueError:
        return []
    if "@" not in parts.netloc:
        return []
    info = parts.netloc.rsplit("@", 1)[0]
    password = info.partition(":")[2]
    return [v for v in (info, password, unquote(password)) if v]


def remember_settings(settings: Settings, environ: dict[str, str] | None = None) -> None:
    """Remember every secret the session's options name: engine arguments (of every
    variant), the endpoint's user-info, and the API key's value."""
    environ = dict(os.environ) if environ is None else environ
    args = [*settings.engine_args]
    endpoints = [settings.endpoint or ""]
    for variant in settings.variants:
        args.extend(variant.engine_args)
        endpoints.append(variant.endpoint or "")
    remember(*secrets_in_args(args))
    for endpoint in endpoints:
        remember(*_userinfo(endpoint))
    if settings.api_key_env:
        remember(environ.get(settings.api_key_env))


# -- the API key -----------------------------------------------------------------------------

# Names that are credentials themselves rather than variable names: a user who pastes the
# key (hf_..., ghp_..., sk_live_...) where the variable's name belongs must not see it
# echoed in "variable ... is not set".
_TOKEN_LIKE = re.compile(
    r"^(hf|ghp|gho|ghu|ghs|ghr|github_pat|glpat|sk|rk|pk|xox[abprs]|AKIA|ASIA)[_-]|"
    r"[A-Za-z0-9]{24,}",
    re.IGNORECASE,
)
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def looks_like_variable_name(name: str) -> bool:
    """A plausible environment variable name, and not a pasted token."""
    return bool(_VARIABLE.match(name)) and not _TOKEN_LIKE.search(name)


class Secret(str):
    """A credential: a ``str`` whose repr never shows it (``--showlocals``, assertion text)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"'{MASK}'"


class SecretHeaders(dict[str, str]):
    """Request headers whose repr masks every value (they carry the Authorization header)."""

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{name!r}: '{MASK}'" for name in self) + "}"


def api_key(variable: str, environ: dict[str, str] | None = None) -> Secret | None:
    """The API key held by ``variable``: surrounding whitespace dropped (a key read from a
    file keeps its newline), and refused when it holds a line break or another control
    character, which would let it add headers of its own. None when the variable is unset or
    empty."""
    from pytest_llmperf.errors import ConfigError

    raw = (os.environ if environ is None else environ).get(variable)
    key = (raw or "").strip()
    if not key:
        return None
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F or ch.isspace() for ch in key):
        raise ConfigError(
            f"--llmperf-api-key-env: the value of {variable} contains whitespace or a control "
            f"character (a line break would inject headers); store the key alone"
        )
    remember(key)
    return Secret(key)


def auth_headers(key: Secret | None) -> SecretHeaders:
    """The Authorization header for ``key`` (none without one), in a repr-safe mapping."""
    return SecretHeaders({"Authorization": f"Bearer {key}"} if key else {})


def request_auth(variable: str | None) -> tuple[SecretHeaders, Secret | None]:
    """The Authorization header and the key that ``--llmperf-api-key-env`` names, both of
    types whose repr masks the key; no header without the option. A named variable that is
    unset is an error: running unauthenticated would measure 401s."""
    from pytest_llmperf.errors import ConfigError

    if not variable:
        return SecretHeaders(), None
    key = api_key(variable)
    if key is None:
        raise ConfigError(f"--llmperf-api-key-env: the environment variable {variable} is not set")
    return auth_headers(key), key
