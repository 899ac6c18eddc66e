"""A temporary folder of the engine's own, removed once the engine has stopped.

Engines leave files in the system's temporary folder and never remove them. vLLM leaves
about six at every start: the ZeroMQ sockets between its API server and its engine core, and
a ``vllm_dist_*`` rendezvous file. A self-hosted runner that starts engines every night for
months collects thousands (a test machine held 1,669 sockets after one day of tests).
Each engine process therefore gets ``TMPDIR`` pointing at a folder made for it when it
starts, and the folder goes when every process of the engine is gone: on a normal stop by
the plugin, after a pytest that died without teardown by the warden (``warden.py``).

Caches that live in the temporary folder by default are still shared between starts: torch
inductor keeps its precompiled C++ headers (1.2 GB on a test machine, about 5 s to build
each) in ``<tmp>/torchinductor_<user>`` whatever ``TORCHINDUCTOR_CACHE_DIR`` says, so the
engine's folder holds a link to where they would have been.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import tempfile
from pathlib import Path

# The warden runs as a script and imports nothing of the plugin, so the name of the folders
# and their removal live there, once.
from pytest_llmperf.engines.warden import SCRATCH_PREFIX as PREFIX
from pytest_llmperf.engines.warden import remove_scratch

# A UNIX socket's path must fit in 104 bytes (macOS; 108 on Linux), and vLLM names its sockets
# with a 36-character uuid inside the temporary folder. mkdtemp adds 8 characters to PREFIX.
SOCKET_PATH_MAX = 100
SOCKET_NAME_LEN = 36
FALLBACK_PARENT = "/tmp"  # short enough wherever a long TMPDIR (macOS: /var/folders/...) is not


def make() -> Path | None:
    """A new, empty folder under the temporary folder this process uses (honours TMPDIR), or
    under /tmp where that one's path is too long for sockets inside the new folder; None when
    neither can be made (the engine then keeps the temporary folder it would have had)."""
    for parent in (tempfile.gettempdir(), FALLBACK_PARENT):
        if _socket_path_length(parent) > SOCKET_PATH_MAX:
            continue
        try:
            folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
        except OSError:
            continue
        _link_shared_caches(folder)
        return folder
    return None


def _socket_path_length(parent: str) -> int:
    return len(os.path.join(parent, PREFIX + "x" * 8, "y" * SOCKET_NAME_LEN).encode())


def environment(folder: Path) -> dict[str, str]:
    """What the engine's environment needs for ``folder`` to be its temporary folder."""
    # Python, torch and vLLM ask tempfile.gettempdir(), which reads TMPDIR first; TEMP and TMP
    # are only read when TMPDIR is unset, so one variable is enough on POSIX.
    return {"TMPDIR": str(folder)}


def remove(folder: Path) -> None:
    """Remove ``folder`` and what the engine left in it; links are removed, not followed.
    Only a folder named as this module names them: never more than one it made."""
    remove_scratch(str(folder))


def _link_shared_caches(folder: Path) -> None:
    shared = Path(tempfile.gettempdir()) / _inductor_folder_name()
    try:
        # Made here if missing: else the first engine would build it inside its own folder,
        # and every later start would build it again.
        shared.mkdir(exist_ok=True)
    except OSError:
        return  # not ours to make (another user's name, a file there): torch copes
    with contextlib.suppress(OSError):  # no links on this file system: torch builds its own
        os.symlink(shared, folder / shared.name, target_is_directory=True)


def _inductor_folder_name() -> str:
    # The name torch gives it (torch/_inductor/runtime/cache_dir_utils.py): the user name with
    # characters that paths forbid replaced.
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)
