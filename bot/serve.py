"""``reactbot serve``: runs the configured platforms until interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import signal
from collections.abc import Callable, Iterator, Sequence
from functools import partial
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

PLATFORM_NAMES = {"discord": "Discord", "slack": "Slack"}

GC_THRESHOLDS = (10_000, 5)
"""Allocations between two collections of the youngest generation, and young collections
between two of the middle one (CPython's defaults: 700 and 10)."""


def missing_variables(config: Config, platform: str) -> list[str]:
    """The environment variables ``platform`` still needs, each with what it is for."""
    secrets = config.secrets
    if platform == "discord":
        return [] if secrets.discord_token else ["DISCORD_TOKEN (the bot token)"]
    missing = [] if secrets.slack_bot_token else ["SLACK_BOT_TOKEN (the xoxb- bot token)"]
    if config.slack.mode == "socket" and secrets.slack_app_token is None:
        missing.append("SLACK_APP_TOKEN (the xapp- app-level token, for Socket Mode)")
    if config.slack.mode == "http" and secrets.slack_signing_secret is None:
        missing.append("SLACK_SIGNING_SECRET (for slack.mode: http)")
    return missing


def not_configured(config: Config, platform: str | None) -> str | None:
    """Why there is nothing to serve for this request, or None when there is: the platform
    asked for and the variables it lacks; with no platform asked for and none configured,
    what each would need (naming what a half-configured one lacks)."""
    enabled = _enabled(config)
    if platform is None and any(enabled.values()):
        return None
    if platform is not None and enabled[platform]:
        return None
    if platform is not None:
        lines = [
            f"{PLATFORM_NAMES[platform]} is not configured: set "
            + _and(missing_variables(config, platform))
            + "."
        ]
        others = [name for name, on in enabled.items() if on and name != platform]
        lines += [
            f"{PLATFORM_NAMES[name]} is configured: reactbot serve --platform {name}"
            for name in others
        ]
        return "\n".join(lines)
    started = [name for name in enabled if _partly_configured(config, name)]
    if not started:
        return HOW_TO_ENABLE
    return "\n".join(
        f"{PLATFORM_NAMES[name]} is not configured yet: set "
        + _and(missing_variables(config, name))
        + "."
        for name in started
    )


def _enabled(config: Config) -> dict[str, bool]:
    return {"discord": config.discord_enabled, "slack": config.slack_enabled}


def _partly_configured(config: Config, platform: str) -> bool:
    s = config.secrets
    if platform == "discord":
        return s.discord_token is not None
    return any(
        v is not None for v in (s.slack_bot_token, s.slack_app_token, s.slack_signing_secret)
    )


def settle_heap() -> None:
    """Garbage collection for a long-running server, once start-up is done.

    The objects alive now (modules, the app, its clients) are frozen out of every later
    collection, and the young generations collect less often (``GC_THRESHOLDS``). With
    CPython's defaults, the objects of a request in flight outlive a few young collections,
    reach the old generation, and trigger a full collection every second or so: at 1,000
    conversations (the Discord soak, ``bench/soak.py``) there were 50 a minute, each
    stalling the event loop for 50-280 ms. With these, a handful a minute, each shorter (the
    frozen objects are not walked), and the young collections stay short because the middle
    generation collects after 5 of them instead of 10.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS, gc.get_threshold()[2])


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


async def serve(config: Config, *, platform: str | None, console: Console) -> int:
    problem = not_configured(config, platform)
    if problem is not None:
        console.print(problem, markup=False)
        return 2
    chosen = [name for name, on in _enabled(config).items() if on and platform in (None, name)]
    app = App.create(config)
    for name in chosen:  # discord.py or slack-bolt, loaded before the heap is settled
        importlib.import_module(f"bot.serve_{name}")
    settle_heap()
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
    pages = list(extra)
    if app.config.web.enabled:  # the trace pages (issue 17) on the same server
        from bot.web import LinkSigner, add_trace_pages

        signer = LinkSigner.from_config(app.config)
        pages.append(partial(add_trace_pages, traces=app.traces, signer=signer))
    web_app = build_ops_app(app, metrics=metrics, expected=chosen, extra=pages)
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
