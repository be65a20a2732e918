"""What stands in front of the web chat's and the trace pages' routes: the ``Host`` and
``Origin`` check (``adapters.web.hosts``), and the counters that bound what one client
address may do in a minute (wrong sign-in tokens, new sessions).

The client address is the TCP peer's. Nothing here reads ``X-Forwarded-For``: any client can
write it, and the bot has no setting naming a proxy to trust. Behind a reverse proxy every
request comes from the proxy's address, so the limits per address act as limits for all.
An IPv6 client counts by its /64, the block one machine is usually given.
"""

from __future__ import annotations

import ipaddress
import logging
import math
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from adapters.web.hosts import HostRule

__all__ = ["WindowLimit", "client_key", "host_middleware", "host_refusal", "too_many"]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

WRONG_HOST = "This server does not answer for that host name."
WRONG_ORIGIN = "Not from this server's pages."


def host_refusal(rule: HostRule, request: web.Request) -> web.Response | None:
    """421 when the request names a host the server does not answer (or none, or two), 403
    when it comes from a page of another origin; None when it may go on."""
    hosts = request.headers.getall("Host", [])
    port = _local_port(request)
    if len(hosts) != 1 or not rule.allows_host(hosts[0], port=port):
        return _refused(request, 421, WRONG_HOST)
    origins = request.headers.getall("Origin", [])
    if len(origins) > 1 or (origins and not rule.allows_origin(origins[0], port=port)):
        return _refused(request, 403, WRONG_ORIGIN)
    return None


def _refused(request: web.Request, status: int, text: str) -> web.Response:
    """In the chat's API's own shape (``{"error"}``) under ``/api/``, else plain text."""
    headers = {"Cache-Control": "no-store"}
    if request.path.startswith("/api/"):
        return web.json_response({"error": text}, status=status, headers=headers)
    return web.Response(status=status, text=text, headers=headers)


def host_middleware(rule: HostRule) -> Middleware:
    """An aiohttp middleware applying ``host_refusal`` before any route runs."""

    @web.middleware
    async def check_host(request: web.Request, handler: Handler) -> web.StreamResponse:
        refused = host_refusal(rule, request)
        return refused if refused is not None else await handler(request)

    return check_host


def guarded(rule: HostRule, handler: Handler) -> Handler:
    """``handler`` behind ``host_refusal`` (for routes on a server shared with others)."""

    async def check_host(request: web.Request) -> web.StreamResponse:
        refused = host_refusal(rule, request)
        return refused if refused is not None else await handler(request)

    return check_host


def _local_port(request: web.Request) -> int | None:
    transport = request.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    if isinstance(sockname, tuple) and len(sockname) >= 2 and isinstance(sockname[1], int):
        return sockname[1]
    return None


def client_key(request: web.Request) -> str:
    """The address limits count by: the TCP peer's (an IPv6 one by its /64)."""
    peer = request.remote or ""
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return peer[:64] or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class WindowLimit:
    """At most ``limit`` events per key in any ``window`` seconds (a sliding window). Keys
    kept are bounded (``max_keys``, the least recently counted go first)."""

    def __init__(
        self,
        limit: int,
        window: float,
        *,
        clock: Callable[[], float],
        max_keys: int = 10_000,
    ) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock
        self._max_keys = max_keys
        self._events: OrderedDict[str, deque[float]] = OrderedDict()

    def wait(self, key: str) -> float:
        """Seconds until one more event of ``key`` is allowed; 0 when it is now."""
        times = self._recent(key)
        if times is None or len(times) < self.limit:
            return 0.0
        return max(times[0] + self.window - self._clock(), 0.001)

    def add(self, key: str) -> bool:
        """Count one event of ``key``; True when it is the one that reaches the limit."""
        times = self._recent(key)
        if times is None:
            times = self._events[key] = deque()
            while len(self._events) > self._max_keys:
                self._events.popitem(last=False)
        times.append(self._clock())
        self._events.move_to_end(key)
        return len(times) == self.limit

    def _recent(self, key: str) -> deque[float] | None:
        times = self._events.get(key)
        if times is None:
            return None
        since = self._clock() - self.window
        while times and times[0] <= since:
            times.popleft()
        return times


def too_many(text: str, wait: float, headers: dict[str, str]) -> web.Response:
    """429 with ``Retry-After`` in whole seconds."""
    retry = str(max(1, math.ceil(wait)))
    return web.Response(status=429, text=text, headers={**headers, "Retry-After": retry})
