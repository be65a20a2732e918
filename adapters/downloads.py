"""Downloading a platform's attachments, and nothing else.

A ``Downloader`` fetches only from its platform's file hosts (Discord's CDN; Slack's
``files.slack.com``) and from the host of the configured API base URL (a proxy, or the local
fakes in tests). Each redirect is checked the same way, by hand (at most ``MAX_REDIRECTS``),
so a redirect cannot lead off those hosts. A URL whose host is an IP address or ``localhost``
is refused unless it is exactly the API base URL's host: no request ever goes where a user's
text points (no server-side request forgery). The bot token, when one is given (Slack's
``url_private`` needs it), is sent only to the token hosts. The body is streamed and the
download stops as soon as it passes the size limit, whatever Content-Length said.

Every failure is a ``core.files.FileRefused`` whose message is the line the person sees.
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import aiohttp

from core.files import MB, FileRefused, Incoming, kind_of, safe_name, size_text

__all__ = ["DISCORD_FILE_HOSTS", "SLACK_FILE_HOSTS", "Downloader", "Origin"]

log = logging.getLogger(__name__)

DISCORD_FILE_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})
SLACK_FILE_HOSTS = frozenset({"files.slack.com"})
MAX_REDIRECTS = 5
CHUNK = 64 * 1024
_REDIRECTS = frozenset({301, 302, 303, 307, 308})

Origin = tuple[str, str, int]
"""(scheme, host, port) of a URL."""


def origin_of(url: str) -> Origin | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = (parts.hostname or "").lower().rstrip(".")
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        return None
    return scheme, host, port or (443 if scheme == "https" else 80)


def _is_literal_or_local(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Downloader:
    """Fetches attachment URLs from ``hosts`` (HTTPS on 443) and from ``api_base_url``'s
    exact origin; ``token`` goes as ``Authorization: Bearer`` to ``token_hosts`` (and the API
    base origin) only."""

    hosts: frozenset[str]
    api_base_url: str | None = None
    token: str | None = None
    token_hosts: frozenset[str] = frozenset()
    max_bytes: int = 10 * MB
    timeout: float = 30.0
    platform: str = "the platform"

    def allowed(self, url: str) -> bool:
        origin = origin_of(url)
        if origin is None:
            return False
        if self.api_base_url is not None and origin == origin_of(self.api_base_url):
            return True
        scheme, host, port = origin
        if _is_literal_or_local(host):
            return False
        return scheme == "https" and port == 443 and host in self.hosts

    def _sends_token(self, url: str) -> bool:
        origin = origin_of(url)
        if self.token is None or origin is None or not self.allowed(url):
            return False
        if self.api_base_url is not None and origin == origin_of(self.api_base_url):
            return True
        return origin[1] in self.token_hosts

    def incoming(
        self,
        name: str,
        url: str,
        *,
        size: int | None,
        content_type: str | None,
        seconds: float | None = None,
    ) -> Incoming:
        """An ``Incoming`` for ``core.files.ingest`` that downloads with this downloader."""

        async def fetch() -> bytes:
            return await self.fetch(url, name=name)

        return Incoming(name, size, content_type, url, fetch, seconds)

    async def fetch(self, url: str, *, name: str) -> bytes:
        """The file's bytes, at most ``max_bytes``; ``FileRefused`` otherwise."""
        shown = safe_name(name)
        if not self.allowed(url):
            raise FileRefused(f"{shown}: not downloaded, it is not on {self.platform}'s file host.")
        try:
            async with aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout), trust_env=False
            ) as session:
                return await self._follow(session, url, shown)
        except TimeoutError as exc:
            raise FileRefused(
                f"{shown}: the download took longer than {self.timeout:g} s."
            ) from exc
        except aiohttp.ClientError as exc:
            raise FileRefused(f"{shown}: the download failed ({type(exc).__name__}).") from exc

    async def _follow(self, session: aiohttp.ClientSession, url: str, shown: str) -> bytes:
        for _ in range(MAX_REDIRECTS + 1):
            headers = {"Authorization": f"Bearer {self.token}"} if self._sends_token(url) else {}
            async with session.get(url, headers=headers, allow_redirects=False) as response:
                if response.status in _REDIRECTS:
                    target = urljoin(url, response.headers.get("Location", ""))
                    if not self.allowed(target):
                        log.info(
                            "attachment %s: redirect off %s's hosts refused", shown, self.platform
                        )
                        raise FileRefused(
                            f"{shown}: {self.platform} did not hand over the file "
                            "(it redirected elsewhere; the bot may lack access to it)."
                        )
                    url = target
                    continue
                if response.status != 200:
                    raise FileRefused(
                        f"{shown}: {self.platform} refused the download (HTTP {response.status})."
                    )
                if headers and response.content_type == "text/html" and kind_of(shown) != "html":
                    # Slack answers a token without files:read with its sign-in page (200).
                    raise FileRefused(
                        f"{shown}: {self.platform} sent a sign-in page instead of the file "
                        "(the bot needs the files:read scope)."
                    )
                return await self._read(response, shown)
        raise FileRefused(f"{shown}: too many redirects.")

    async def _read(self, response: aiohttp.ClientResponse, shown: str) -> bytes:
        too_big = FileRefused(f"{shown}: larger than {size_text(self.max_bytes)}.")
        declared = response.content_length
        if declared is not None and declared > self.max_bytes:
            raise too_big
        body = bytearray()
        # Counted while reading: a Content-Length that lies, or none at all, changes nothing.
        async for chunk in response.content.iter_chunked(CHUNK):
            body += chunk
            if len(body) > self.max_bytes:
                raise too_big
        return bytes(body)
