"""Serving a fake's aiohttp app on loopback, the same way for every fake."""

from __future__ import annotations

from aiohttp import web


async def serve_locally(
    app: web.Application, *, host: str = "127.0.0.1", port: int = 0, shutdown_timeout: float = 1.0
) -> tuple[web.AppRunner, int]:
    """Start ``app`` on ``host`` (a free port unless given); returns the runner and the port.

    ``shutdown_timeout`` is short because the only long-running handlers in the fakes are
    deliberate stalls, which each fake releases before ``runner.cleanup()``.
    """
    runner = web.AppRunner(
        app, shutdown_timeout=shutdown_timeout, handle_signals=False, access_log=None
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner, int(runner.addresses[0][1])
