"""Entry point of the ``reactbot`` command; the only place that starts an event loop."""

from __future__ import annotations

import gc
import sys


def main() -> None:
    # Start-up allocates some 40,000 objects (modules, classes, functions) that all stay
    # alive: collecting them on the way is wasted time (~80 young and 7 middle collections
    # on `reactbot ask`, 15-25 ms). run_cli freezes them and turns collection back on once
    # its imports are done.
    gc.disable()
    try:
        from bot.cli import parse_args, run_cli

        # --help, --version and a usage error exit here, before asyncio is imported (~50 ms
        # of `reactbot --help` otherwise; bench/startup.py).
        args = parse_args(sys.argv[1:])
        import asyncio

        code = asyncio.run(run_cli(sys.argv[1:], parsed=args))
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
