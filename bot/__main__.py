"""Entry point of the ``reactbot`` command; the only place that starts an event loop."""

from __future__ import annotations

import asyncio
import sys


def main() -> None:
    from bot.cli import run_cli

    try:
        code = asyncio.run(run_cli(sys.argv[1:]))
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
