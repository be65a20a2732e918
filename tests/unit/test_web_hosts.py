"""``adapters.web.hosts``: the names a server of ours answers (DNS rebinding), the ``Host``
and ``Origin`` parsers under hostile text, and the two ``web`` keys that feed them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.web.hosts import LOOPBACK_NAMES, HostName, HostRule, parse_host, parse_origin
from bot.config import ConfigError, load_config
from tests.hostile import hostile_text
from tests.properties import examples

LOCAL = HostRule.of(bind="127.0.0.1")
PROXIED = HostRule.of(
    bind="0.0.0.0",
    public_url="https://Chat.Example.com/bot",
    allowed=["bot.internal:8443", "b.lan"],
)


@pytest.mark.parametrize(
    ("header", "parsed"),
    [
        ("localhost:8080", HostName("localhost", 8080)),
        ("LOCALHOST.:8080", HostName("localhost", 8080)),
        ("[::1]:8080", HostName("::1", 8080)),
        ("[0:0:0:0:0:0:0:1]", HostName("::1")),
        ("127.0.0.1", HostName("127.0.0.1")),
        ("bot.example.com:443", HostName("bot.example.com", 443)),
        ("", None),
        ("::1", None),  # IPv6 only in brackets
        ("[::1", None),
        ("[::1]x", None),
        ("[evil.example]", None),
        ("a b", None),
        ("user@host", None),
        ("host/path", None),
        ("host:0", None),
        ("host:65536", None),
        ("host:", None),
        ("host:80:80", None),
        ("http://host", None),
        ("ho\u0455t", None),  # a Cyrillic letter in place of the s
        ("..", None),
        ("a..b", None),
    ],
)
def test_a_host_header_parses_to_its_name_and_port(header: str, parsed: HostName | None) -> None:
    assert parse_host(header) == parsed


@pytest.mark.parametrize(
    ("origin", "parsed"),
    [
        ("http://localhost:8080", HostName("localhost", 8080)),
        ("https://Bot.Example.com", HostName("bot.example.com", 443)),
        ("http://[::1]", HostName("::1", 80)),
        ("null", None),
        ("ftp://host", None),
        ("http://host/", None),
        ("http://u@host", None),
        ("http://", None),
    ],
)
def test_an_origin_parses_to_its_host_and_the_port_it_means(
    origin: str, parsed: HostName | None
) -> None:
    assert parse_origin(origin) == parsed


def test_loopback_answers_its_names_on_its_own_port_only() -> None:
    for header in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080", "LocalHost.:8080"):
        assert LOCAL.allows_host(header, port=8080), header
    refused: tuple[str | None, ...] = ("127.0.0.1:8081", "127.0.0.1", "evil.example:8080", "", None)
    for header in refused:
        assert not LOCAL.allows_host(header, port=8080), header
    assert not LOCAL.allows_host("127.0.0.1:8080", port=None)  # no socket: nothing is known
    assert LOCAL.allows_host("localhost", port=80)  # a Host without a port means 80 (or 443)
    assert LOCAL.allows_origin("http://localhost:8080", port=8080)
    assert not LOCAL.allows_origin("http://localhost:3000", port=8080)  # another local app
    assert not LOCAL.allows_origin("http://evil.example:8080", port=8080)


def test_a_proxied_server_answers_its_public_host_and_the_allowed_ones() -> None:
    assert PROXIED.allows_host("chat.example.com", port=8080)
    assert PROXIED.allows_host("chat.example.com:443", port=8080)
    assert PROXIED.allows_origin("https://chat.example.com", port=8080)
    assert PROXIED.allows_host("bot.internal:8443", port=8080)
    assert not PROXIED.allows_host("bot.internal:9000", port=8080)
    assert not PROXIED.allows_host("bot.internal", port=8080)  # only its port was allowed
    assert PROXIED.allows_host("b.lan:1234", port=8080) and PROXIED.allows_host("b.lan", port=1)
    assert not PROXIED.allows_host("chat.example.com.evil.example", port=8080)
    assert not PROXIED.allows_host("evil.example", port=8080)
    assert PROXIED.allows_host("localhost:8080", port=8080)  # the machine itself, still


def test_a_server_on_one_address_answers_that_address() -> None:
    rule = HostRule.of(bind="192.0.2.7")
    assert rule.allows_host("192.0.2.7:8080", port=8080)
    assert not rule.allows_host("192.0.2.8:8080", port=8080)
    v6 = HostRule.of(bind="2001:db8::7")
    assert v6.allows_host("[2001:DB8:0::7]:8080", port=8080)
    assert not HostRule.of(bind="0.0.0.0").allows_host("0.0.0.0:8080", port=8080)


_names = st.from_regex(r"[a-z0-9-]{1,20}(\.[a-z0-9-]{1,20}){0,3}", fullmatch=True)
_ports = st.none() | st.integers(1, 65535)


@settings(max_examples=examples(500, ci=60))
@given(st.text(max_size=80) | hostile_text())
def test_any_text_parses_or_is_refused_and_never_raises(text: str) -> None:
    for parsed in (parse_host(text), parse_origin(text)):
        if parsed is not None:
            assert parsed.name == parsed.name.lower() and not parsed.name.endswith(".")
            assert parsed.port is None or 0 < parsed.port <= 65535
    # Whatever a request names, the loopback rule lets through only the loopback names.
    if LOCAL.allows_host(text, port=8080):
        host = parse_host(text)
        assert host is not None and host.name in LOOPBACK_NAMES
    if LOCAL.allows_origin(text, port=8080):
        origin = parse_origin(text)
        assert origin is not None and origin.name in LOOPBACK_NAMES and origin.port == 8080


@settings(max_examples=examples(500, ci=60))
@given(_names, _ports, st.booleans(), st.booleans())
def test_a_name_reads_back_whatever_its_case_and_trailing_dot(
    name: str, port: int | None, upper: bool, dot: bool
) -> None:
    written = (name.upper() if upper else name) + ("." if dot else "")
    header = written if port is None else f"{written}:{port}"
    assert parse_host(header) == HostName(name, port)
    rule = HostRule.of(bind="0.0.0.0", allowed=[name])
    assert rule.allows_host(header, port=8080)
    assert not rule.allows_host(f"{name}x.evil.example", port=8080)


# ---- the keys ------------------------------------------------------------------------------


def test_the_web_keys_default_and_load_from_the_file_and_the_environment(tmp_path: Path) -> None:
    defaults = load_config(None, {}).web
    assert defaults.allowed_hosts == () and defaults.max_sessions_per_address == 20
    path = tmp_path / "c.yaml"
    path.write_text("web:\n  allowed_hosts: [bot.example.com, 'b.lan:8443']\n")
    assert load_config(path, {}).web.allowed_hosts == ("bot.example.com", "b.lan:8443")
    env = {
        "REACTBOT_WEB__ALLOWED_HOSTS": '["chat.example.org"]',
        "REACTBOT_WEB__MAX_SESSIONS_PER_ADDRESS": "5",
    }
    from_env = load_config(None, env).web
    assert from_env.allowed_hosts == ("chat.example.org",)
    assert from_env.max_sessions_per_address == 5


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("web:\n  allowed_hosts: ['https://bot.example.com']\n", "is not a host name"),
        ("web:\n  allowed_hosts: ['bot.example.com/chat']\n", "is not a host name"),
        ("web:\n  max_sessions_per_address: 0\n", "web.max_sessions_per_address"),
    ],
)
def test_a_bad_web_key_is_refused_at_start(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words):
        load_config(path, {})


def test_serve_prints_a_url_the_chat_answers(tmp_path: Path) -> None:
    from bot.serve_web import chat_url

    path = tmp_path / "c.yaml"
    for web, shown in (
        ("{port: 8080}", "http://127.0.0.1:8080/"),
        ("{host: 0.0.0.0, port: 9000}", "http://127.0.0.1:9000/"),  # not http://0.0.0.0:9000/
        ("{host: '::1', port: 9000}", "http://[::1]:9000/"),
        ("{host: 0.0.0.0, public_url: 'https://chat.example.com/'}", "https://chat.example.com/"),
    ):
        path.write_text(f"web: {web}\n")
        assert chat_url(load_config(path, {})) == shown
