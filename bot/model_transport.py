"""``AiohttpTransport``: the model client's HTTP over aiohttp, under the ``openai`` SDK.

The SDK keeps the request (auth, base URL, headers, timeouts, status errors); this is only
the transport beneath its ``httpx2`` client (``httpx2.AsyncBaseTransport``: one method).
Why: a streamed reply arrives as hundreds of small reads, and httpx2's own transport
(httpcore2 over anyio) pays per read a cancel scope, an h11 event and a pause and resume of
the socket's reader (two ``epoll_ctl`` calls): a third of the bot's CPU in the soak
(issue 46). aiohttp's reader keeps the socket registered and hands over what has arrived.

Failures come out as httpx2's, as its own transport raises them (so the SDK and
``core.openai_model`` map them as before): a connection refused or a DNS failure is a
``ConnectError``, a slow connect a ``ConnectTimeout``, a silent socket a ``ReadTimeout``, a
dropped connection or a broken body a ``RemoteProtocolError``, any other socket fault a
``ReadError``. Bodies are left encoded (``auto_decompress`` off): httpx2 decodes them.

``read_every``: a body is read at most this often (seconds), what came meanwhile in one
read. A reply streams a chunk every 20 ms or so, each a wake-up of the run's task and a pass
through the reader, the parser and the live message; read every 0.1 s they come five at a
time, and nobody sees it: the live message shows text once a second at most.

A proxy named in the environment (``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``) is used as
httpx2's transport would, looked up once per host: aiohttp's own ``trust_env`` reads
``~/.netrc`` in a thread on every request, which the SDK's Authorization header makes moot.
"""

from __future__ import annotations

import asyncio
import urllib.request

import aiohttp
import httpx2

__all__ = ["READ_EVERY", "AiohttpTransport"]

_MAX_CONNECTIONS = 1000
"""As the SDK's default client: a process may stream this many replies at once."""
_KEEPALIVE_SECONDS = 30.0
READ_EVERY = 0.1
"""The app's ``read_every``: well under the live message's second between edits."""


class AiohttpTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport over one ``aiohttp.ClientSession``, opened on the first request
    (inside the running loop) and closed by ``aclose``."""

    def __init__(self, *, read_every: float = 0.0) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._read_every = read_every
        self._proxies: dict[tuple[str, str], str | None] = {}

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=_MAX_CONNECTIONS,
                keepalive_timeout=_KEEPALIVE_SECONDS,
                ssl=httpx2.create_ssl_context(),
            )
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        return self._session

    def _proxy_for(self, url: httpx2.URL) -> str | None:
        key = (url.scheme, url.host)
        if key not in self._proxies:
            proxies = urllib.request.getproxies_environment()
            proxy = proxies.get(url.scheme) or proxies.get("all")
            if proxy and urllib.request.proxy_bypass(url.host):
                proxy = None
            self._proxies[key] = proxy
        return self._proxies[key]

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        timeout = request.extensions.get("timeout", {})
        body = await request.aread()  # the SDK's chat request is bytes already
        try:
            response = await self._get_session().request(
                request.method,
                # The URL's user:password (a base URL may carry them) is the client's to turn
                # into a header, as httpx2's own transport leaves it; aiohttp refuses both.
                str(request.url.copy_with(userinfo=b"")),
                headers=request.headers.multi_items(),
                data=body or None,
                allow_redirects=False,
                proxy=self._proxy_for(request.url),
                compress=None,
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    connect=timeout.get("pool"),
                    sock_connect=timeout.get("connect"),
                    sock_read=timeout.get("read"),
                ),
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _mapped(exc, request) from exc
        return httpx2.Response(
            status_code=response.status,
            headers=response.raw_headers,
            stream=_Body(response, request, self._read_every, timeout.get("read")),
            request=request,
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


class _Body(httpx2.AsyncByteStream):
    """The response's bytes as they arrive, each read whatever has come (no fixed size),
    at most every ``every`` seconds, failing once nothing has come for ``read_timeout``."""

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        request: httpx2.Request,
        every: float,
        read_timeout: float | None,
    ) -> None:
        self._response = response
        self._request = request
        self._content = response.content
        self._read = response.content.readany
        self._every = every
        self._next = 0.0
        self._watchdog: _Silence | None = None
        protocol = response.connection.protocol if response.connection else None
        if read_timeout and protocol is not None:
            # aiohttp's read timeout moves a timer on every packet (a cancel and a new
            # TimerHandle per chunk of the reply); the body's is a look now and then.
            protocol.read_timeout = None
            self._watchdog = _Silence(response.content, read_timeout)

    def __aiter__(self) -> _Body:  # an iterator, not a generator: one layer less per read
        return self

    async def __anext__(self) -> bytes:
        if self._every and not self._content.is_eof():  # the end is there: no waiting for it
            wait = self._next - asyncio.get_running_loop().time()
            if wait > 0:
                await asyncio.sleep(wait)
        try:
            data = await self._read()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _mapped(exc, self._request) from exc
        if not data:
            raise StopAsyncIteration
        if self._every:
            self._next = asyncio.get_running_loop().time() + self._every
        return data

    async def aclose(self) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()
        # Read to its end, the connection goes back to the pool; cut short, it is closed
        # (what is left of the body would be read as the next response).
        if self._response.content.at_eof():
            self._response.release()
        else:
            self._response.close()


class _Silence:
    """Fails a body's reads once no byte has come for ``seconds``: a look every quarter of
    that, so a dead connection fails within 1.25 times it (never before it), whatever the
    reader is doing meanwhile."""

    def __init__(self, content: aiohttp.StreamReader, seconds: float) -> None:
        self._content = content
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._seen = content.total_bytes
        self._quiet_since = self._loop.time()
        self._handle = self._loop.call_later(seconds / 4, self._look)

    def _look(self) -> None:
        content, now = self._content, self._loop.time()
        if content.is_eof() or content.exception() is not None:
            return
        if content.total_bytes != self._seen:
            self._seen, self._quiet_since = content.total_bytes, now
        elif now - self._quiet_since >= self._seconds:
            content.set_exception(aiohttp.SocketTimeoutError("Timeout on reading data from socket"))
            return
        self._handle = self._loop.call_later(self._seconds / 4, self._look)

    def stop(self) -> None:
        self._handle.cancel()


def _mapped(exc: BaseException, request: httpx2.Request) -> httpx2.TransportError:
    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx2.ConnectTimeout(message, request=request)
    if isinstance(exc, TimeoutError):  # aiohttp's read timeouts are TimeoutErrors too
        return httpx2.ReadTimeout(message, request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx2.ConnectError(message, request=request)
    if isinstance(exc, aiohttp.InvalidURL):
        return httpx2.UnsupportedProtocol(message, request=request)
    if isinstance(
        exc,
        (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError),
    ):
        return httpx2.RemoteProtocolError(message, request=request)
    return httpx2.ReadError(message, request=request)
