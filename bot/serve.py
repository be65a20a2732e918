"""``reactbot serve``: runs the configured platforms until interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from rich.console import Console

from bot.app import App
from bot.config import Config
from bot.logs import RedactSecrets, secret_values

if TYPE_CHECKING:  # prometheus_client loads only when the ops endpoint is on
    from bot.ops import OpsServer, RouteAdder

log = logging.getLogger(__name__)

HOW_TO_ENABLE = """\
No platform is configured, so there is nothing to serve.
  Discord: set DISCORD_TOKEN (bot token; enable the Message Content intent).
  Slack:   set SLACK_BOT_TOKEN, and SLACK_APP_TOKEN for slack.mode: socket (the default)
           or SLACK_SIGNING_SECRET for slack.mode: http.
To try the bot without a platform: reactbot chat"""


async def serve(config: Config, *, platform: str | None, console: Console) -> int:
    wanted = {
        "discord": config.discord_enabled,
        "slack": config.slack_enabled,
    }
    if platform is not None and not wanted[platform]:
        console.print(HOW_TO_ENABLE, markup=False)
        return 2
    if not any(wanted.values()):
        console.print(HOW_TO_ENABLE, markup=False)
        return 2
    chosen = [name for name, on in wanted.items() if on and platform in (None, name)]
    app = App.create(config)
    redact = RedactSecrets(secret_values(config)).redact
    ops: OpsServer | None = None
    try:
        if config.ops.enabled:
            from bot.ops import OpsError

            try:
                ops = await _start_ops(app, chosen)
            except OpsError as exc:
                console.print(f"ops: {redact(str(exc))}", style="red", markup=False)
                return 1
        await app.start()
        for note in app.notes:
            console.print(f"note: {note}", style="dim", markup=False)
        with _cancel_on_sigterm() as terminated:
            try:
                async with asyncio.TaskGroup() as group:
                    runs = [group.create_task(_run(name, app, console, redact)) for name in chosen]
            except asyncio.CancelledError:
                if not terminated.is_set():
                    raise
                console.print("Stopped (SIGTERM).", markup=False)
                return 0
    finally:
        if ops is not None:
            await ops.stop()
        await app.aclose()
    return 0 if all(run.result() for run in runs) else 1


async def _start_ops(app: App, chosen: list[str], *, extra: Sequence[RouteAdder] = ()) -> OpsServer:
    """The ops endpoint, serving before the platforms start (``/readyz`` says so meanwhile);
    ``extra`` adds further pages to the same server (``build_ops_app``)."""
    from bot.ops import Metrics, OpsServer, build_ops_app

    metrics = Metrics(app)
    app.agent.observers.append(metrics.observer)
    web_app = build_ops_app(app, metrics=metrics, expected=chosen, extra=extra)
    server = OpsServer(web_app, host=app.config.ops.host, port=app.config.ops.port, metrics=metrics)
    await server.start()
    return server


async def _run(name: str, app: App, console: Console, redact: Callable[[str], str]) -> bool:
    """One platform; its failure (a bad token, no network) is reported in one line and does
    not take the other platform down."""
    try:
        await _RUNNERS[name](app)
    except Exception as exc:
        log.debug("%s stopped", name, exc_info=True)
        console.print(f"{name}: stopped: {redact(_describe(exc))}", style="red", markup=False)
        return False
    return True


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@contextlib.contextmanager
def _cancel_on_sigterm() -> Iterator[asyncio.Event]:
    """SIGTERM (``docker stop``) cancels the serve task, so every platform shuts down
    gracefully: running answers end as stopped, connections close."""
    terminated = asyncio.Event()
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def on_sigterm() -> None:
        terminated.set()
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):
        installed = False
    try:
        yield terminated
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGTERM)


async def _serve_discord(app: App) -> None:
    from bot.serve_discord import serve_discord

    await serve_discord(app)


async def _serve_slack(app: App) -> None:
    from bot.serve_slack import serve_slack

    await serve_slack(app)


_RUNNERS = {"discord": _serve_discord, "slack": _serve_slack}
