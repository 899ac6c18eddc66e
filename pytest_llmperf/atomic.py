"""Write a file so that readers see the old content or the new, never half, and so that an
interrupt leaves no temporary file behind.

The text goes to a temporary file in the target's folder (the rename must stay on one file
system), is flushed to disk, then replaces the target. ``tempfile.mkstemp`` is not used: a
Ctrl-C can land after it created the file but before it returned the name, and the file is
then left over with nobody knowing it. Here the name is chosen first, so whatever interrupts
the write can remove it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

TEMPORARY_SUFFIX = ".tmp"


def temporary_pattern(path: Path) -> str:
    """The glob (relative to ``path``'s folder) that matches the temporaries of ``path``."""
    return f".{glob.escape(path.name)}.*{TEMPORARY_SUFFIX}"


def write_atomically(path: Path, data: str | bytes) -> None:
    """Replace ``path`` by ``data`` (text is written as UTF-8), all at once or not at all.

    The new file gets the usual permissions for the user's umask (0644 under the common
    022): baselines and reports are artifacts others read and commit.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    while True:
        temporary = path.parent / f".{path.name}.{secrets.token_hex(8)}{TEMPORARY_SUFFIX}"
        ours = True
        try:
            try:
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            except FileExistsError:
                ours = False  # another writer's temporary (a 1 in 2**64 chance)
                raise
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
            return
        except BaseException as problem:
            if not ours and isinstance(problem, FileExistsError):
                continue  # the name was taken: try another
            if ours:
                _discard(temporary)
            raise


def _discard(temporary: Path) -> None:
    with contextlib.suppress(OSError):
        temporary.unlink()


def write_target(path: Path) -> Path:
    """Where a write of ``path`` must go: the file a symbolic link points to.

    ``os.replace`` would turn a link into a regular file, and a baseline shared through a link
    would silently stop updating; writing to the target (locked there, not beside the link)
    keeps the link and updates what it shares.
    """
    from pytest_llmperf.errors import ConfigError

    if not path.is_symlink():
        return path
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # a loop of links
        raise ConfigError(f"{path}: cannot follow the symbolic link ({exc})") from None


def append_text(path: Path, text: str) -> None:
    """Append ``text`` to a regular file, never through a symbolic link.

    Appended files (the history, the job summary) are often in shared folders, where a link
    planted at their name would send the plugin's lines into any file the user can write.
    """
    from pytest_llmperf.errors import ConfigError

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if path.is_symlink():
            raise ConfigError(
                f"{path} is a symbolic link (to {os.readlink(path)}); the plugin appends only to "
                f"a regular file: name the file itself, or remove the link"
            ) from None
        raise ConfigError(f"{path}: cannot append: {exc.strerror}") from None
    try:
        data = text.encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(path: Path, timeout: float, what: str, error: type[Exception]) -> Iterator[None]:
    """Hold the lock file beside ``path`` (``.NAME.lock``) for a read-modify-write or an
    append that other processes (xdist workers, parallel jobs) may do at the same time;
    ``error`` names ``what`` could not be locked within ``timeout`` seconds."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(path.with_name(f".{path.name}.lock")))
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise error(
            f"{path}: could not lock the {what} within {timeout:.0f} s: another process "
            f"holds {lock.lock_file}"
        ) from None
    try:
        yield
    finally:
        lock.release()
