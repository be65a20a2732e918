"""The trace pages over real HTTP: aiohttp's own server, the real client, signed links."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urljoin, urlsplit

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bot.web import FORBIDDEN_BODY, LinkSigner, add_trace_pages
from core.replay import diff_traces
from core.stores import InMemoryTraceStore
from core.trace import ApprovalRecord, Trace, TraceStep

SECRET = "test-link-secret-0123456789abcdef"
NOW = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def make_trace(question: str = "What is 6*7?", *, steps: int = 3, trace_id: str = "") -> Trace:
    trace = Trace(question=question, user="ada", conversation="discord:42", models=["m1"])
    if trace_id:
        trace.id = trace_id
    trace.started_at, trace.ended_at = NOW - 60, NOW - 50
    for i in range(1, steps + 1):
        trace.steps.append(
            TraceStep(
                index=i,
                thought=f"thinking {i}",
                action="calculate",
                action_input=f"6*{i}",
                observation=str(6 * i),
                started_at=NOW - 60 + i,
                ended_at=NOW - 59.5 + i,
                prompt_tokens=10,
                completion_tokens=5,
            )
        )
    trace.answer, trace.status = "42", "answered"
    return trace


@dataclass
class Site:
    base: str
    signer: LinkSigner
    clock: Clock
    traces: InMemoryTraceStore
    http: aiohttp.ClientSession


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    clock = Clock()
    traces = InMemoryTraceStore(clock=clock)
    signer = LinkSigner(SECRET, public_url=None, ttl=7 * 86400, clock=clock)
    app = web.Application()
    add_trace_pages(app, traces=traces, signer=signer)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    base = str(server.make_url("")).rstrip("/")
    signer.public_url = base  # known once the server has its port
    async with aiohttp.ClientSession() as http:
        yield Site(base, signer, clock, traces, http)
    await server.close()


async def get(site: Site, url: str) -> tuple[int, str, aiohttp.typedefs.LooseHeaders]:
    async with site.http.get(url, allow_redirects=False) as response:
        return response.status, await response.text(), response.headers


async def test_a_signed_link_opens_the_page(site: Site) -> None:
    trace = make_trace("Is <b>bold</b> bold?")
    await site.traces.save(trace)
    link = site.signer.link(trace.id)
    assert link is not None and link.startswith(f"{site.base}/t/{trace.id}?exp=")
    status, body, headers = await get(site, link)
    assert status == 200
    assert "Is &lt;b&gt;bold&lt;/b&gt; bold?" in body
    assert "<b>bold</b>" not in body
    assert body.count('class="step') == 3
    csp = headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "unsafe" not in csp
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["Content-Type"].startswith("text/html")


async def test_signature_good_wrong_expired_and_other_id(site: Site) -> None:
    trace, other = make_trace(), make_trace("other")
    await site.traces.save(trace)
    await site.traces.save(other)
    link = site.signer.link(trace.id)
    assert link is not None
    query = parse_qs(urlsplit(link).query)
    exp, sig = query["exp"][0], query["sig"][0]
    page = f"{site.base}/t/{trace.id}"

    assert (await get(site, f"{page}?exp={exp}&sig={sig}"))[0] == 200
    wrong = ("0" if sig[0] != "0" else "1") + sig[1:]
    assert (await get(site, f"{page}?exp={exp}&sig={wrong}"))[0] == 403
    assert (await get(site, f"{page}?exp={int(exp) + 1}&sig={sig}"))[0] == 403  # exp is signed
    assert (await get(site, f"{page}?exp={exp}"))[0] == 403
    assert (await get(site, f"{page}?sig={sig}"))[0] == 403
    assert (await get(site, page))[0] == 403
    assert (await get(site, f"{page}?exp=soon&sig={sig}"))[0] == 403
    assert (await get(site, f"{page}?exp={exp}&sig={sig.upper()}"))[0] == 403
    # The same signature does not open another trace.
    assert (await get(site, f"{site.base}/t/{other.id}?exp={exp}&sig={sig}"))[0] == 403
    # A link signed with another secret does not either.
    stranger = LinkSigner("another-secret-000000000000000", public_url=site.base, clock=site.clock)
    forged = stranger.link(trace.id)
    assert forged is not None and (await get(site, forged))[0] == 403
    # Expired: at the second it expires, and after.
    site.clock.now = float(exp) - 1
    assert (await get(site, link))[0] == 200
    site.clock.now = float(exp)
    assert (await get(site, link))[0] == 403


async def test_the_403_is_the_same_for_unknown_and_known_ids(site: Site) -> None:
    known = make_trace()
    await site.traces.save(known)
    link = site.signer.link(known.id)
    assert link is not None
    query = urlsplit(link).query
    bad = query[:-1] + ("0" if not query.endswith("0") else "1")
    answers = [
        await get(site, f"{site.base}/t/{known.id}?{bad}"),
        await get(site, f"{site.base}/t/ffffffffffff?{bad}"),
        await get(site, f"{site.base}/t/{known.id}"),
        await get(site, f"{site.base}/t/ffffffffffff"),
        await get(site, f"{site.base}/t/{known.id}/trace.json?{bad}"),
        await get(site, f"{site.base}/t/ffffffffffff/trace.json?{bad}"),
        await get(site, f"{site.base}/t/{known.id}/vs/ffffffffffff?{bad}"),
        await get(site, f"{site.base}/t/ffffffffffff/vs/{known.id}?{bad}"),
    ]
    assert {status for status, _, _ in answers} == {403}
    assert {body for _, body, _ in answers} == {FORBIDDEN_BODY}
    shown = [
        {k: v for k, v in headers.items() if k.lower() not in ("date",)}
        for _, _, headers in answers
    ]
    assert all(h == shown[0] for h in shown)
    assert known.question not in FORBIDDEN_BODY and known.id not in FORBIDDEN_BODY


async def test_a_valid_link_to_a_trace_no_longer_stored_says_so(site: Site) -> None:
    link = site.signer.link("0123456789ab")
    assert link is not None
    status, body, _ = await get(site, link)
    assert status == 404 and "no longer stored" in body


async def test_the_downloads_are_signed_and_whole(site: Site) -> None:
    trace = make_trace("Download <me>", steps=2)
    trace.steps[0].observation = "x" * 300_000  # beyond what the page shows
    await site.traces.save(trace)
    link = site.signer.link(trace.id)
    assert link is not None
    _, body, _ = await get(site, link)
    hrefs = [part.split('"', 1)[0] for part in body.split('href="')[1:]]
    downloads = [h.replace("&amp;", "&") for h in hrefs if "/trace." in h]
    assert len(downloads) == 2
    for href in downloads:
        url = urljoin(link, href)
        async with site.http.get(url) as response:
            assert response.status == 200
            text = await response.text()
            disposition = response.headers["Content-Disposition"]
        if href.split("?")[0].endswith(".json"):
            assert Trace.from_dict(json.loads(text)) == Trace.from_json(trace.to_json())
            assert disposition == f'attachment; filename="trace-{trace.id}.json"'
        else:
            assert text == trace.to_markdown()
            assert disposition == f'attachment; filename="trace-{trace.id}.md"'
        unsigned = url.split("?")[0]
        assert (await get(site, unsigned))[0] == 403


async def test_the_comparison_marks_the_first_step_where_the_runs_part(site: Site) -> None:
    original, replay = make_trace(steps=4), make_trace(steps=4)
    replay.steps[2].observation = "a different result"
    await site.traces.save(original)
    await site.traces.save(replay)
    link = site.signer.compare_link(original.id, replay.id)
    assert link is not None
    status, body, _ = await get(site, link)
    assert status == 200
    # In the words of `reactbot trace diff` on the same two traces (one function says it).
    verdict = diff_traces(original, replay).summary()
    assert verdict == "First difference at step 3: observation."
    assert f"{verdict} (<a" in body
    assert body.count('id="parts"') == 1 and body.count("step parts") == 2
    # Signed for the pair in this order only; a single trace's signature does not open it.
    reversed_url = f"{site.base}/t/{replay.id}/vs/{original.id}?{urlsplit(link).query}"
    assert (await get(site, reversed_url))[0] == 403
    single = site.signer.link(original.id)
    assert single is not None
    pair_with_single = f"{site.base}/t/{original.id}/vs/{replay.id}?{urlsplit(single).query}"
    assert (await get(site, pair_with_single))[0] == 403
    # Each column links to its own signed downloads.
    for href in [p.split('"', 1)[0] for p in body.split('href="')[1:] if "/trace.json" in p]:
        assert (await get(site, urljoin(link, href.replace("&amp;", "&"))))[0] == 200


async def test_same_runs_and_a_longer_replay(site: Site) -> None:
    a, b, longer = make_trace(), make_trace(), make_trace(steps=5)
    for t in (a, b, longer):
        await site.traces.save(t)
    same = site.signer.compare_link(a.id, b.id)
    assert same is not None
    assert (
        "The two runs took the same steps and gave the same answer." in (await get(site, same))[1]
    )
    ends = site.signer.compare_link(a.id, longer.id)
    assert ends is not None
    body = (await get(site, ends))[1]
    assert "First difference at step 4: only one run has it." in body
    assert "this run ends here" in body


async def test_without_a_secret_there_are_no_links_and_no_pages() -> None:
    off = LinkSigner(None, public_url="https://bot.example")
    assert off.link("abc") is None and off.compare_link("a", "b") is None
    assert not off.check("abc", exp="9999999999", sig="0" * 64)
    assert LinkSigner(SECRET, public_url=None).link("abc") is None
    app = web.Application()
    add_trace_pages(app, traces=InMemoryTraceStore(), signer=off)
    async with TestServer(app, host="127.0.0.1") as server, aiohttp.ClientSession() as http:
        response = await http.get(server.make_url("/t/abc"))
        assert response.status == 404
        response.release()


async def test_a_failing_store_gets_a_clear_503(site: Site) -> None:
    class Broken(InMemoryTraceStore):
        async def get(self, trace_id: str) -> Trace | None:
            raise ConnectionError("redis is away")

    app = web.Application()
    add_trace_pages(app, traces=Broken(), signer=site.signer)
    async with TestServer(app, host="127.0.0.1") as server:
        link = site.signer.link("0123456789ab")
        assert link is not None
        url = server.make_url("/t/0123456789ab").with_query(urlsplit(link).query)
        async with site.http.get(url) as response:
            assert response.status == 503
            assert "not answering" in await response.text()


async def test_a_hostile_trace_id_is_quoted_in_links(site: Site) -> None:
    trace = make_trace(trace_id='a"b/../<x>?y#z')
    await site.traces.save(trace)
    link = site.signer.link(trace.id)
    assert link is not None
    assert urlsplit(link).path == "/t/a%22b%2F..%2F%3Cx%3E%3Fy%23z"
    status, body, _ = await get(site, link)
    assert status == 200
    assert "<x>" not in body and "a&#34;b/../&lt;x&gt;?y#z" in body


async def test_the_page_shows_approvals_errors_and_safe_sources(site: Site) -> None:
    trace = make_trace(steps=2)
    trace.steps[0].approval = ApprovalRecord("approved", "ada")
    trace.steps[1].error = "tool timed out"
    trace.steps[1].sources = ["https://example.org/a", "javascript:alert(1)", "data:text/html,x"]
    await site.traces.save(trace)
    link = site.signer.link(trace.id)
    assert link is not None
    body = (await get(site, link))[1]
    assert "✅ approved by ada" in body and "tool timed out" in body
    assert (
        '<a href="https://example.org/a" rel="noopener noreferrer nofollow" '
        'referrerpolicy="no-referrer">' in body
    )
    assert 'href="javascript:' not in body and 'href="data:' not in body
    assert "javascript:alert(1)" in body  # shown as text


def test_the_signer_from_config_is_off_unless_enabled_with_a_secret() -> None:
    from bot.config import load_config

    secret = {"REACTBOT_LINK_SECRET": SECRET}
    on = {"web": {"enabled": True, "public_url": "https://b.example/r/"}}
    base = load_config(None, secret)
    enabled = base.model_copy(update={"web": base.web.model_copy(update=on["web"])})
    link = LinkSigner.from_config(enabled).link("abc")
    assert link is not None and link.startswith("https://b.example/r/t/abc?exp=")
    assert not LinkSigner.from_config(base).enabled  # web.enabled is false
    no_secret = enabled.model_copy(update={"secrets": load_config(None, {}).secrets})
    assert not LinkSigner.from_config(no_secret).enabled
    assert "test-link-secret" not in repr(LinkSigner.from_config(enabled))
