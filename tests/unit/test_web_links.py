"""LinkSigner: any id signs and checks; another id, another expiry, another key or a changed
signature never does."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

from hypothesis import given
from hypothesis import strategies as st

from bot.web import LinkSigner

NOW = 1_800_000_000.0
ids = st.text(min_size=1, max_size=80)


def signer(secret: str = "unit-secret-0123456789abcdef") -> LinkSigner:
    return LinkSigner(secret, public_url="https://bot.example/", ttl=3600, clock=lambda: NOW)


@given(trace_id=ids, other=ids, flip=st.integers(0, 63))
def test_a_link_checks_for_its_id_only(trace_id: str, other: str, flip: int) -> None:
    links = signer()
    link = links.link(trace_id)
    assert link is not None
    parts = urlsplit(link)
    assert parts.scheme == "https" and parts.netloc == "bot.example"
    assert unquote(parts.path.removeprefix("/t/")) == trace_id  # one path segment, quoted
    query = parse_qs(parts.query)
    exp, sig = query["exp"][0], query["sig"][0]
    assert int(exp) == NOW + 3600
    assert links.check(trace_id, exp=exp, sig=sig)
    if other != trace_id:
        assert not links.check(other, exp=exp, sig=sig)
    changed = sig[:flip] + ("0" if sig[flip] != "0" else "1") + sig[flip + 1 :]
    assert not links.check(trace_id, exp=exp, sig=changed)
    assert not links.check(trace_id, exp=str(int(exp) + 1), sig=sig)
    assert not signer("another-secret-0000000000000").check(trace_id, exp=exp, sig=sig)
    assert not links.check(trace_id, trace_id, exp=exp, sig=sig)  # not a pair's signature


@given(a=ids, b=ids)
def test_a_pair_is_signed_in_its_order(a: str, b: str) -> None:
    links = signer()
    link = links.compare_link(a, b)
    assert link is not None
    query = parse_qs(urlsplit(link).query)
    exp, sig = query["exp"][0], query["sig"][0]
    assert links.check(a, b, exp=exp, sig=sig)
    if a != b:
        assert not links.check(b, a, exp=exp, sig=sig)
    assert not links.check(a + b, exp=exp, sig=sig)


def test_expiry_and_malformed_parameters() -> None:
    clock = [NOW]
    links = LinkSigner("k" * 32, public_url="https://b.example", ttl=60, clock=lambda: clock[0])
    link = links.link("abc")
    assert link is not None
    query = parse_qs(urlsplit(link).query)
    exp, sig = query["exp"][0], query["sig"][0]
    clock[0] = NOW + 59
    assert links.check("abc", exp=exp, sig=sig)
    clock[0] = NOW + 60
    assert not links.check("abc", exp=exp, sig=sig)
    for bad_exp, bad_sig in [
        (None, sig),
        (exp, None),
        ("", sig),
        ("-1", sig),
        (exp + " ", sig),
        ("1e12", sig),
        ("9" * 40, sig),
        (exp, sig.upper()),
        (exp, sig[:-1]),
        (exp, sig + "0"),
    ]:
        assert not links.check("abc", exp=bad_exp, sig=bad_sig)


def test_surrogates_in_an_id_are_signed_not_raised() -> None:
    links = signer()
    link = links.link("a\udc80b")
    assert link is not None
    query = parse_qs(urlsplit(link).query)
    assert links.check("a\udc80b", exp=query["exp"][0], sig=query["sig"][0])
