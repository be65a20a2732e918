"""Entry point of the ``reactbot`` command; the only place that starts an event loop."""

from __future__ import annotations

import gc
import sys


def main() -> None:
    # Start-up allocates some 40,000 objects (modules, classes, functions) that all stay
    # alive: collecting them on the way is wasted time (~80 young and 7 middle collections
    # on `reactbot ask`, 15-25 ms). run_cli freezes them and turns collection back on once
    # its imports are done; asyncio is imported here, after collection is off, for the same
    # reason.
    gc.disable()
    import asyncio

    from bot.cli import run_cli

    try:
        code = asyncio.run(run_cli(sys.argv[1:]))
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
