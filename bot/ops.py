"""The operator's HTTP endpoint of ``reactbot serve``: health, readiness and Prometheus metrics.

``/healthz``  the process answers (200, always, while the event loop runs)
``/readyz``   every platform ``serve`` started is connected and Redis answers: 200, else 503
              with the reasons as JSON (``{"ready": false, "reasons": [...]}``)
``/metrics``  Prometheus text format; every name starts ``reactbot_``

``Metrics`` owns its own ``CollectorRegistry`` (never the process-wide default) and watches
runs through the agent's observer seam (``core.observe``); edits, 429s and Redis errors are
read from the adapters' own counters when scraped, so no adapter knows of Prometheus.
``build_ops_app`` takes further route adders, so other pages (trace pages) share the server.
The module loads only when ``serve`` starts the endpoint (``ops.enabled``).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric

from bot.app import App
from bot.logs import RedactSecrets, platform_of, secret_values
from core.errors import ReactbotError
from core.events import FinalEvent
from core.llm import Usage
from core.observe import ModelRequest
from core.pricing import Price
from core.trace import Trace

if TYPE_CHECKING:
    from core.scheduler import Scheduler

log = logging.getLogger(__name__)

RouteAdder = Callable[[web.Application], None]

MEMORY_READY = 0.9
"""Above this share of Redis's ``maxmemory`` the bot is not ready: writes are about to be
refused (``noeviction``) or, worse, keys evicted."""
READY_TIMEOUT = 2.0
"""Seconds each readiness check may take (a hung Redis must not hang the probe)."""
MAX_LABEL = 64
"""Longest label value kept (model names come from config; still, bounded)."""

STEP_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50)
SECONDS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120)
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
LATENESS_BUCKETS = (1, 2, 5, 10, 15, 30, 60, 300, 900, 3600)


class OpsError(ReactbotError):
    """The endpoint cannot start; ``str(error)`` is one line saying why and what to change."""


def _label(text: str) -> str:
    return text[:MAX_LABEL] or "unknown"


class Metrics:
    """Every reactbot metric, in a registry of its own."""

    def __init__(self, app: App, *, registry: CollectorRegistry | None = None) -> None:
        # No ``*_created`` series beside each counter and histogram (prometheus_client's
        # default): Prometheus does not need them, and they double the series scraped. The
        # switch is the library's, for the process; this registry is the only one served.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.app = app
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.runs = Counter(
            "reactbot_runs",
            "Runs ended, by platform and outcome",
            ["platform", "outcome"],
            registry=r,
        )
        self.steps = Histogram(
            "reactbot_run_steps",
            "Model steps per run (format retries excluded)",
            ["platform"],
            buckets=STEP_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "reactbot_runs_in_flight", "Runs started and not yet ended", ["platform"], registry=r
        )
        self.tool_calls = Counter(
            "reactbot_tool_calls",
            "Tool calls, by tool and outcome (error: failed, timed out, unknown or stopped)",
            ["tool", "outcome"],
            registry=r,
        )
        self.model_seconds = Histogram(
            "reactbot_model_call_seconds",
            "Model requests, from the request to the reply's last chunk",
            ["model", "outcome"],
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.first_token = Histogram(
            "reactbot_model_first_token_seconds",
            "Model requests, from the request to the reply's first chunk",
            ["model"],
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "reactbot_model_tokens",
            "Tokens the model reported, by model and direction (input: prompt; output: reply)",
            ["model", "direction"],
            registry=r,
        )
        self.cost = Counter(
            "reactbot_model_cost_usd",
            "US dollars the model calls cost, by model (only models with a price)",
            ["model"],
            registry=r,
        )
        self.loop_lag = Histogram(
            "reactbot_event_loop_lag_seconds",
            f"How late the event loop ran a timer due every {app.room.lag.interval:g} s"
            if app.room.lag is not None
            else "How late the event loop ran a timer",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        if app.room.lag is not None:  # the probe admission reads (``adapters.room``)
            app.room.lag.listeners.append(self.loop_lag.observe)
        r.register(_AdapterCounters(app))
        self.observer = _MetricsObserver(self)
        """Give it to the agent: ``app.agent.observers.append(metrics.observer)``."""

    def known_tool(self, name: str) -> str:
        """The tool's name as a label; a name the model made up is ``unknown`` (labels must
        stay few, and model text is no label)."""
        return name if self.app.tools.get(name) is not None else "unknown"

    def watch_schedules(self, scheduler: Scheduler) -> None:
        """``reactbot_schedule_runs_total{outcome}`` (read from the scheduler's own counts
        when scraped) and ``reactbot_schedule_lateness_seconds`` (each planned run's seconds
        behind its time)."""
        lateness = Histogram(
            "reactbot_schedule_lateness_seconds",
            "Scheduled runs: seconds from the planned time to the run's start",
            buckets=LATENESS_BUCKETS,
            registry=self.registry,
        )
        scheduler.lateness.append(lateness.observe)
        self.registry.register(_ScheduleCounts(scheduler))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _AdapterCounters:
    """Read at scrape time from the adapters' and the store's own counters."""

    def __init__(self, app: App) -> None:
        self._app = app

    def collect(self) -> Iterable[Metric]:
        edits = CounterMetricFamily(
            "reactbot_live_edits", "Live-message edits the platform took", labels=["platform"]
        )
        limited = CounterMetricFamily(
            "reactbot_rate_limited",
            "429s the platform answered (Discord: any request; Slack: chat.update)",
            labels=["platform"],
        )
        for name, link in sorted(self._app.platforms.items()):
            edits.add_metric([name], link.edits())
            limited.add_metric([name], link.rate_limited())
        redis = CounterMetricFamily(
            "reactbot_redis_errors", "Calls to Redis that failed (the bot went on without it)"
        )
        full = CounterMetricFamily(
            "reactbot_redis_oom",
            "Writes a full Redis refused (OOM, maxmemory reached; the bot answered without memory)",
        )
        health = self._app.health
        redis.add_metric([], health.failures if health is not None else 0)
        full.add_metric([], health.out_of_memory if health is not None else 0)
        refused = CounterMetricFamily(
            "reactbot_runs_refused",
            "Questions refused, by platform and reason (capacity: agent.max_concurrent_runs "
            "going; overloaded: the event loop later than ops.max_loop_lag; busy: the asker's "
            "runs at once; cooldown, budget, access, question, model, closing)",
            labels=["platform", "reason"],
        )
        for (platform, reason), count in sorted(self._app.room.refused.items()):
            refused.add_metric([platform, reason], count)
        yield from (edits, limited, redis, full, refused)


class _ScheduleCounts:
    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def collect(self) -> Iterable[Metric]:
        runs = CounterMetricFamily(
            "reactbot_schedule_runs",
            "Scheduled occurrences by outcome (ok; run_failed: the run failed; post_failed: "
            "its message could not be posted; skipped: missed ones dropped after downtime)",
            labels=["outcome"],
        )
        for outcome, count in sorted(self._scheduler.counts.items()):
            runs.add_metric([outcome], count)
        yield runs


class _MetricsObserver:
    __slots__ = ("_metrics",)

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def start(self, trace: Trace) -> _RunProbe:
        platform = platform_of(trace.conversation)
        self._metrics.in_flight.labels(platform).inc()
        return _RunProbe(self._metrics, platform)


class _RunProbe:
    __slots__ = ("_ended", "_metrics", "_platform")

    def __init__(self, metrics: Metrics, platform: str) -> None:
        self._metrics = metrics
        self._platform = platform
        self._ended = False

    def model_call(self, step: int, model: str, request: ModelRequest) -> _ModelCallProbe:
        price = self._metrics.app.agent.prices.get(model)
        return _ModelCallProbe(self._metrics, _label(model), price)

    def tool_call(
        self, step: int, call_id: str | None, name: str, input: str, description: str
    ) -> _ToolCallProbe:
        return _ToolCallProbe(self._metrics, self._metrics.known_tool(name))

    def end(self, final: FinalEvent) -> None:
        if self._ended:
            return
        self._ended = True
        m, trace = self._metrics, final.trace
        m.in_flight.labels(self._platform).dec()
        m.runs.labels(self._platform, trace.status).inc()
        m.steps.labels(self._platform).observe(trace.step_count)


class _ModelCallProbe:
    __slots__ = ("_metrics", "_model", "_price", "_started", "_usage")

    def __init__(self, metrics: Metrics, model: str, price: Price | None = None) -> None:
        self._metrics = metrics
        self._model = model
        self._price = price
        self._started = time.perf_counter()
        self._usage: Usage | None = None

    def first_chunk(self) -> None:
        elapsed = time.perf_counter() - self._started
        self._metrics.first_token.labels(self._model).observe(elapsed)

    def response(self, id: str, model: str) -> None:
        pass

    def chunk(self, usage: Usage | None, finish: str | None) -> None:
        if usage is not None:  # some servers repeat cumulative usage: the last one counts
            self._usage = usage

    def end(self, error: BaseException | None) -> None:
        m = self._metrics
        elapsed = time.perf_counter() - self._started
        m.model_seconds.labels(self._model, "ok" if error is None else "error").observe(elapsed)
        if self._usage is not None:
            m.tokens.labels(self._model, "input").inc(self._usage.prompt_tokens)
            m.tokens.labels(self._model, "output").inc(self._usage.completion_tokens)
            if self._price is not None:
                m.cost.labels(self._model).inc(self._price.cost(self._usage))


class _ToolCallProbe:
    __slots__ = ("_metrics", "_tool")

    def __init__(self, metrics: Metrics, tool: str) -> None:
        self._metrics = metrics
        self._tool = tool

    def end(self, text: str, error: bool) -> None:
        self._metrics.tool_calls.labels(self._tool, "error" if error else "ok").inc()


# --------------------------------------------------------------------------------------------
# Readiness


async def readiness(app: App, expected: Sequence[str], redact: Callable[[str], str]) -> list[str]:
    """Why the bot is not ready (each reason one line, ``redact``-ed), or nothing."""
    checks: list[Awaitable[str | None]] = [_platform_problem(app, name) for name in expected]
    if app.redis_client is not None:
        checks.append(_redis_problem(app))
    return [redact(problem) for problem in await asyncio.gather(*checks) if problem]


async def _platform_problem(app: App, name: str) -> str | None:
    link = app.platforms.get(name)
    if link is None:
        return f"{name}: not started yet"
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            connected = await link.connected()
    except TimeoutError:
        return f"{name}: no answer about the connection within {READY_TIMEOUT:g} s"
    except Exception as exc:
        return f"{name}: connection state unknown ({_one_line(exc)})"
    return None if connected else f"{name}: not connected"


async def _redis_problem(app: App) -> str | None:
    assert app.redis_client is not None
    name = app.health.name if app.health is not None else "Redis"
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            await app.redis_client.ping()
            used, limit = await app.stores.shared.memory() if app.stores.shared else (0, 0)
    except TimeoutError:
        return f"redis: {name} did not answer PING within {READY_TIMEOUT:g} s"
    except Exception as exc:
        return f"redis: {name} does not answer ({_one_line(exc)})"
    if limit > 0 and used > MEMORY_READY * limit:
        return (
            f"redis: {name} uses {used / limit:.0%} of its maxmemory ({used:,} of {limit:,} "
            f"bytes): writes will be refused; raise maxmemory or lower redis.max_traces"
        )
    return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------------------------
# The server


def build_ops_app(
    app: App,
    *,
    metrics: Metrics,
    expected: Sequence[str] = (),
    extra: Sequence[RouteAdder] = (),
) -> web.Application:
    """``/healthz``, ``/readyz`` (``expected``: the platforms that must be connected) and
    ``/metrics``, then whatever each of ``extra`` adds (``add(web_app)``)."""

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    redact = RedactSecrets(secret_values(app.config)).redact

    async def readyz(_: web.Request) -> web.Response:
        reasons = await readiness(app, expected, redact)
        if reasons:
            return web.json_response({"ready": False, "reasons": reasons}, status=503)
        return web.json_response({"ready": True, "platforms": list(expected)})

    async def metrics_page(_: web.Request) -> web.Response:
        body = metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})

    web_app = web.Application(client_max_size=64 * 1024)
    web_app.router.add_get("/healthz", healthz)
    web_app.router.add_get("/readyz", readyz)
    web_app.router.add_get("/metrics", metrics_page)
    for add in extra:
        add(web_app)
    return web_app


class OpsServer:
    """Serves ``web_app`` on ``host:port``; the event loop's lag is sampled meanwhile (by
    the process's probe, ``App.room.lag``, which admission reads too)."""

    def __init__(
        self, web_app: web.Application, *, host: str, port: int, metrics: Metrics | None = None
    ) -> None:
        self.host = host
        self.port = port
        self._metrics = metrics
        self._runner = web.AppRunner(web_app, access_log=None, handle_signals=False)

    @property
    def metrics(self) -> Metrics | None:
        return self._metrics

    async def start(self) -> int:
        """Listen; return the bound port (0 picks a free one). Raises ``OpsError``."""
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise OpsError(_listen_problem(self.host, self.port, exc)) from None
        sockets = getattr(site._server, "sockets", None) or ()  # aiohttp keeps it here
        self.port = int(sockets[0].getsockname()[1]) if sockets else self.port
        if self._metrics is not None:
            self._metrics.app.room.start()
        log.info("ops endpoint on http://%s:%d (/healthz, /readyz, /metrics)", self.host, self.port)
        return self.port

    async def stop(self) -> None:
        await self._runner.cleanup()


def _listen_problem(host: str, port: int, exc: OSError) -> str:
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        why = "the port is already in use (another reactbot, or another program)"
    elif exc.errno == errno.EACCES:
        why = "permission denied (ports below 1024 need privileges)"
    elif exc.errno == errno.EADDRNOTAVAIL:
        why = "this machine has no such address"
    else:
        why = exc.strerror or str(exc)
    return (
        f"cannot listen on {where}: {why}. Set ops.port (or ops.host) to another, "
        "or ops.enabled: false"
    )
