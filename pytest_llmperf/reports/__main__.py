"""The command-line entry points, one module so that no report imports another for it:

python -m pytest_llmperf.reports variants --baselines FOLDER [...]   # the seeds' table
python -m pytest_llmperf.reports history FILE --html OUT              # the trend plot
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

COMMANDS = {
    "variants": "the comparison table of configurations, from baseline files alone",
    "history": "the trend plot of a --llmperf-history file, as HTML",
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        lines = [f"  {name:<9} {text}" for name, text in COMMANDS.items()]
        print("usage: python -m pytest_llmperf.reports COMMAND ...\n" + "\n".join(lines))
        return 2
    if args[0] == "variants":
        from pytest_llmperf.reports.baseline_table import main as command
    else:
        from pytest_llmperf.reports.history import main as command
    return command(args[1:])


if __name__ == "__main__":
    sys.exit(main())
