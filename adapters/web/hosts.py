"""Which ``Host`` and ``Origin`` a server of ours answers: the defence against DNS rebinding.

A page on ``evil.example`` whose name the attacker re-points at 127.0.0.1 reaches a loopback
server from a person's browser as its own origin: the cookie, the CSRF token and the
``Origin`` check all pass, because they all come from that page. The one thing it cannot
choose is the name in ``Host``: the browser sends the name it resolved, the attacker's. So a
server answers only the names it is reached by:

- the loopback names (``127.0.0.1``, ``localhost``, ``[::1]``) with the port the request came
  in on: no attacker's name resolves *as* these names, whatever it resolves to;
- the address it listens on, when that is one address (an IP literal is never rebound);
- the host of ``web.public_url`` (any port: a proxy may or may not pass it on);
- each of ``web.allowed_hosts`` (``name`` for any port, ``name:port`` for that one).

Names are compared lowercased, without a trailing dot, IPv6 addresses in their short form.
Pure functions (no I/O, no aiohttp): ``bot.config`` checks ``web.allowed_hosts`` with them.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["HostName", "HostRule", "is_loopback", "parse_host", "parse_origin"]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
_WILDCARDS = ("0.0.0.0", "::", "")
_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
_PORT = re.compile(r"[0-9]{1,5}")
DEFAULT_PORTS = {"http": 80, "https": 443}


def is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")


@dataclass(frozen=True, slots=True)
class HostName:
    """A host as a request names it: ``name`` normalised, ``port`` None when not given."""

    name: str
    port: int | None = None


def parse_host(text: str) -> HostName | None:
    """``name``, ``name:port``, ``[v6]`` or ``[v6]:port`` (a ``Host`` header's forms), or None
    for anything else: a scheme, a path, user info, spaces, an empty name, a port over 65535."""
    if not text or len(text) > 300 or not text.isascii():
        return None
    text = text.lower()
    if text.startswith("["):
        inside, bracket, rest = text[1:].partition("]")
        if not bracket:
            return None
        try:
            name = str(ipaddress.IPv6Address(inside))
        except ValueError:
            return None
        port_text = rest.removeprefix(":") if rest.startswith(":") else None
        if rest and port_text is None:
            return None
    else:
        name, colon, port_text_ = text.partition(":")
        port_text = port_text_ if colon else None
        if name.endswith("."):
            name = name[:-1]
        if len(name) > 253 or not _NAME.fullmatch(name):
            return None
    if port_text is None:
        return HostName(name)
    if not _PORT.fullmatch(port_text) or not 0 < int(port_text) <= 65535:
        return None
    return HostName(name, int(port_text))


def parse_origin(text: str) -> HostName | None:
    """An ``Origin`` header (``scheme://host[:port]``, http or https) as the host and the port
    it means (the scheme's own when none is given); None for ``null`` or anything else."""
    if len(text) > 320 or not text.isascii():
        return None
    scheme, sep, rest = text.partition("://")
    default = DEFAULT_PORTS.get(scheme.lower())
    if not sep or default is None or not rest or "/" in rest or "@" in rest:
        return None
    host = parse_host(rest)
    if host is None:
        return None
    return host if host.port is not None else HostName(host.name, default)


@dataclass(frozen=True, slots=True)
class HostRule:
    """The names one server answers. ``local`` names match only the port the request came in
    on; ``named`` ones match their port, or any port when they give none."""

    local: frozenset[str]
    named: frozenset[HostName]

    @classmethod
    def of(
        cls, *, bind: str, public_url: str | None = None, allowed: Iterable[str] = ()
    ) -> HostRule:
        """The rule of a server listening on ``bind``; ``allowed`` entries must parse (the
        config checks them at start)."""
        local = set(LOOPBACK_NAMES)
        bound = parse_host(_bracketed(bind))
        if bound is not None and bind not in _WILDCARDS and _is_ip(bound.name):
            local.add(bound.name)
        named: set[HostName] = set()
        if public_url:
            url_host = parse_host(_bracketed(urlsplit(public_url).hostname or ""))
            if url_host is not None:
                named.add(url_host)
        for entry in allowed:
            host = parse_host(entry)
            if host is None:
                raise ValueError(f"not a host name: {entry!r}")
            named.add(host)
        return cls(frozenset(local), frozenset(named))

    def allows_host(self, header: str | None, *, port: int | None) -> bool:
        """``header``: the request's ``Host``; ``port``: the port it came in on."""
        host = parse_host(header) if header else None
        return host is not None and self._allows(host, port)

    def allows_origin(self, header: str, *, port: int | None) -> bool:
        origin = parse_origin(header)
        return origin is not None and self._allows(origin, port)

    def _allows(self, host: HostName, port: int | None) -> bool:
        if host.name in self.local and port is not None and _same_port(host.port, port):
            return True
        return any(
            entry.name == host.name and (entry.port is None or _same_port(host.port, entry.port))
            for entry in self.named
        )


def _same_port(given: int | None, expected: int) -> bool:
    """A ``Host`` without a port names the scheme's default one, 80 or 443."""
    return given == expected or (given is None and expected in (80, 443))


def _bracketed(address: str) -> str:
    """An address as a ``Host`` names it (IPv6 in brackets)."""
    return f"[{address}]" if ":" in address else address


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
