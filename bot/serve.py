"""``reactbot serve``: runs the configured platforms until interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from rich.console import Console

from adapters import words
from adapters.tasks import alongside
from bot.app import App
from bot.config import Config
from bot.logs import RedactSecrets, secret_values
from bot.platforms import BY_NAME, PLATFORMS, Platform, Serve, enabled
from bot.scheduling import running_schedules

if TYPE_CHECKING:  # prometheus_client loads only when the ops endpoint is on
    from bot.ops import OpsServer, RouteAdder

log = logging.getLogger(__name__)

WAIT_FOR_CONFIG_ENV = "REACTBOT_WAIT_FOR_CONFIG"
"""Set (``1``) where a supervisor restarts a bot that exits, as compose.yaml's does: with
nothing to serve, ``serve`` then says so in one line and waits for SIGTERM (exit 0) instead
of exiting 2 and being restarted in a loop."""


def wants_to_wait(env: Mapping[str, str]) -> bool:
    return env.get(WAIT_FOR_CONFIG_ENV, "").strip().lower() in ("1", "true", "yes")


def how_to_enable() -> str:
    """What to set, platform by platform, when none is configured."""
    lines = ["No platform is configured, so there is nothing to serve."]
    lines += ["  " + line for p in PLATFORMS for line in p.how_to_enable.splitlines()]
    lines.append("To try the bot without a platform: reactbot chat")
    return "\n".join(lines)


GC_THRESHOLDS = (10_000, 5)
"""Allocations between two collections of the youngest generation, and young collections
between two of the middle one (CPython's defaults: 700 and 10)."""


def not_configured(config: Config, platform: str | None) -> str | None:
    """Why there is nothing to serve for this request, or None when there is: the platform
    asked for and the variables it lacks; with no platform asked for and none configured,
    what each would need (naming what a half-configured one lacks)."""
    ready = enabled(config)
    if platform is None and ready:
        return None
    if platform is not None and BY_NAME[platform] in ready:
        return None
    if platform is not None:
        asked = BY_NAME[platform]
        lines = [f"{asked.title} is not configured: set {_and(asked.missing(config))}."]
        lines += _instead(asked, config)
        lines += [
            f"{other.title} is configured: reactbot serve --platform {other.name}"
            for other in ready
        ]
        return "\n".join(lines)
    started = [p for p in PLATFORMS if p.started(config)]
    if not started:
        return how_to_enable()
    return "\n".join(
        line
        for p in started
        for line in (
            f"{p.title} is not configured yet: set {_and(p.missing(config))}.",
            *_instead(p, config),
        )
    )


def _instead(platform: Platform, config: Config) -> list[str]:
    instead = platform.instead(config)
    return [f"  {instead}"] if instead else []


def waiting_line(config: Config, problem: str) -> str:
    """The one line ``serve`` says while it waits for the platforms' secrets."""
    if any(p.started(config) for p in PLATFORMS):  # what the half-configured one lacks
        reason = " ".join(line.strip() for line in problem.splitlines())
    else:
        reason = (
            "No platform is configured: set DISCORD_TOKEN, SLACK_BOT_TOKEN with "
            "SLACK_APP_TOKEN (slack.mode: socket) or SLACK_SIGNING_SECRET (slack.mode: http), "
            "TELEGRAM_BOT_TOKEN, or web.chat: true (REACTBOT_WEB__CHAT=true) for the web chat."
        )
    return f"{reason} {_waiting('set them (in .env with compose)')}"


def _waiting(fix: str) -> str:
    return (
        f"Waiting instead of exiting ({WAIT_FOR_CONFIG_ENV}=1): {fix} and restart the bot; "
        "SIGTERM ends the wait."
    )


def config_error_waiting_line() -> str:
    """Said after the config errors, when ``serve`` waits rather than exit 2."""
    return _waiting("fix the configuration")


async def wait_for_sigterm(console: Console, line: str) -> int:
    """Say ``line`` once and sleep until SIGTERM (``docker stop``); then exit 0."""
    with _cancel_on_sigterm() as terminated:
        console.print(line, markup=False)  # once SIGTERM is handled: it may come at once
        try:
            await asyncio.Event().wait()  # nothing sets it: only SIGTERM ends this
        except asyncio.CancelledError:
            if not terminated.is_set():
                raise
    return 0


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


OLD_GENERATION_EVERY = 15.0
"""Seconds the oldest generation may go uncollected while serving (``OldGeneration``)."""
OLD_GENERATION_SHARE = 0.01
"""At most this share of the process's time goes to ``OldGeneration``'s collections."""


class OldGeneration:
    """Collects the oldest generation whenever CPython has not for ``every`` seconds.

    What an ended run leaves (its task and trace, their exceptions' frames, Discord's cards)
    refers to itself, so the collector frees it, not reference counting; and a run lives
    through a few young collections, so most of it reaches the oldest generation first.
    CPython collects that generation once the objects moved there since its last full
    collection number a quarter of those that collection kept, and after ``settle_heap`` that
    count is the start-up heap, frozen and never walked again (some 600,000 objects): no full
    collection came for minutes at 80 conversations, and each ended run stayed in memory
    until one did (``bench/soak.py``: Discord's RSS grew 11-15 MB per 1,000 runs, Slack's
    ~4, all of it freed by a full collection). Once this one has run, CPython's own count
    starts from what it kept, as it would without the freeze.

    The frozen start-up heap is not walked, so a full collection costs what the runs in
    flight hold: 35-65 ms at 80 conversations, 370 ms at 250. It holds the event loop, so
    the next waits until the last one's time is at most ``share`` of the time between."""

    def __init__(
        self,
        every: float = OLD_GENERATION_EVERY,
        *,
        share: float = OLD_GENERATION_SHARE,
        clock: Callable[[], float] = time.monotonic,
        collect: Callable[[], object] = gc.collect,
    ) -> None:
        self.every = every
        self.share = share
        self._clock = clock
        self._collect = collect
        self.last = clock()
        """When the oldest generation was last collected (by CPython or by ``tick``)."""
        self.took = 0.0
        """Seconds ``tick``'s last collection held the process."""
        self.collections = 0
        """Full collections ``tick`` made."""

    def _heard(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info.get("generation") == 2:
            self.last = self._clock()

    @contextlib.contextmanager
    def listening(self) -> Iterator[OldGeneration]:
        """Hears CPython's own full collections (``gc.callbacks``) while open."""
        gc.callbacks.append(self._heard)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._heard)

    def tick(self) -> bool:
        """A full collection if none came for ``every`` seconds (or longer, when the last
        took more than ``share`` of that); whether it made one."""
        if self._clock() - self.last < max(self.every, self.took / self.share):
            return False
        started = self._clock()
        self._collect()
        self.last = self._clock()
        self.took = self.last - started
        self.collections += 1
        return True

    async def run(self) -> None:
        """Until cancelled: ``tick`` every ``every`` seconds."""
        with self.listening():
            while True:
                await asyncio.sleep(self.every)
                self.tick()


@contextlib.asynccontextmanager
async def collecting_old_garbage(every: float = OLD_GENERATION_EVERY) -> AsyncIterator[None]:
    """``OldGeneration`` running while the platforms serve."""
    async with alongside(OldGeneration(every).run(), name="the oldest generation"):
        yield


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


async def serve(
    config: Config, *, platform: str | None, console: Console, wait: bool = False
) -> int:
    """``wait``: with nothing to serve, wait for SIGTERM instead of exiting 2."""
    if platform == "web" and not config.web.chat:  # asked for by name: that turns it on
        config = config.model_copy(update={"web": config.web.model_copy(update={"chat": True})})
    problem = not_configured(config, platform)
    if problem is not None and wait:
        return await wait_for_sigterm(console, waiting_line(config, problem))
    if problem is not None:
        console.print(problem, markup=False)
        return 2
    chosen = [p for p in enabled(config) if platform in (None, p.name)]
    # The offline demo model streams at reading pace in a browser, so its steps can be seen.
    web = any(p.name == "web" for p in chosen)
    app = App.create(config, demo_delay=0.015 if web else 0.0)
    servers = {p.name: p.load() for p in chosen}  # their SDKs, loaded before the heap settles
    settle_heap()
    redact = RedactSecrets(secret_values(config)).redact
    ops: OpsServer | None = None
    try:
        if config.ops.enabled:
            from bot.ops import OpsError

            try:
                ops = await _start_ops(app, list(servers))
            except OpsError as exc:
                console.print(f"ops: {redact(str(exc))}", style="red", markup=False)
                return 1
        await app.start()
        for note in app.notes:
            console.print(f"note: {note}", style="dim", markup=False)
        if not config.redis.configured:
            console.print(f"note: {words.SCHEDULES_NOT_KEPT}", style="dim", markup=False)
        with _cancel_on_sigterm() as terminated:
            try:
                async with (
                    collecting_old_garbage(),
                    running_schedules(app, ops.metrics if ops else None),
                    asyncio.TaskGroup() as group,
                ):
                    runs = [
                        group.create_task(_run(name, serve_it, app, console, redact))
                        for name, serve_it in servers.items()
                    ]
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
        from adapters.web.hosts import HostRule
        from bot.web import LinkSigner, add_trace_pages

        signer = LinkSigner.from_config(app.config)
        hosts = HostRule.of(
            bind=app.config.ops.host,
            public_url=app.config.web.public_url,
            allowed=app.config.web.allowed_hosts,
        )
        add = partial(add_trace_pages, traces=app.stores.traces, signer=signer, hosts=hosts)
        pages.append(add)
    web_app = build_ops_app(app, metrics=metrics, expected=chosen, extra=pages)
    server = OpsServer(web_app, host=app.config.ops.host, port=app.config.ops.port, metrics=metrics)
    await server.start()
    return server


async def _run(
    name: str, serve_it: Serve, app: App, console: Console, redact: Callable[[str], str]
) -> bool:
    """One platform; its failure (a bad token, no network) is reported in one line and does
    not take the other platform down."""
    try:
        await serve_it(app)
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
