"""What a new file's permissions are on this machine, for tests that check them."""

from __future__ import annotations

import os


def default_file_mode() -> int:
    """The mode ``open()`` gives a new file here: 0o666 less the umask (0o644 under 022)."""
    umask = os.umask(0)
    os.umask(umask)  # reading the umask means setting it: put it straight back
    return 0o666 & ~umask
