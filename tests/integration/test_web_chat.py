"""The web chat over real HTTP: the page, the session cookie, CSRF, the live message over
Server-Sent Events, Stop, approvals, history after a reload, refusals, sign-in with a token,
and the bounds (streams per session, the body). The browser itself is
tests/integration/test_web_chat_browser.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from adapters import words
from adapters.attachments import carried
from adapters.channels import ChannelChoices
from adapters.room import Room
from adapters.web.chat import MAX_STREAMS, WebChat, WebChatRefused, WebSettings
from bot.serve_web import page_signer
from bot.web import add_trace_pages
from core.agent import Agent, AgentSettings
from core.approval import ApprovalBroker, InMemoryDecisions, InMemoryPending
from core.budgets import InMemoryUsageCounters, TokenBudgets
from core.file_workers import FileReaders
from core.files import FileLimits
from core.knowledge import LookupTool
from core.prompt import QUESTION_PREFIX
from core.scripted import ScriptedModel, Turn
from core.stores import Stores
from core.tools import FunctionTool, Tool, ToolHints, ToolRegistry
from tests.surfaces.policy import split

CALC = [
    Turn("Thought: I will use the calculator.\nAction: calculate[17*23+4]", delay=0.05),
    Turn("Thought: I have it.\nFinal Answer: 17*23+4 = 395", delay=0.05),
]


@dataclass
class Chat:
    chat: WebChat
    url: str
    http: aiohttp.ClientSession
    csrf: str
    model: ScriptedModel
    ran: list[str]

    async def post(self, path: str, body: Any, **headers: str) -> tuple[int, dict[str, Any]]:
        sent = {"X-CSRF-Token": self.csrf, "Origin": self.url, **headers}
        async with self.http.post(self.url + path, json=body, headers=sent) as response:
            return response.status, await response.json()

    async def ask(self, question: str) -> tuple[int, dict[str, Any]]:
        return await self.post("/api/ask", {"question": question})

    async def history(self) -> list[dict[str, Any]]:
        async with self.http.get(self.url + "/api/history") as response:
            assert response.status == 200
            turns: list[dict[str, Any]] = (await response.json())["turns"]
            return turns


class Events:
    """One open ``/api/events`` stream and the states it has delivered."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.seen: list[dict[str, Any]] = []

    async def until(
        self, predicate: Callable[[dict[str, Any]], bool], *, within: float = 10.0
    ) -> dict[str, Any]:
        try:
            async with asyncio.timeout(within):
                while True:
                    for data in self.seen:
                        if predicate(data):
                            return data
                    line = (await self.response.content.readline()).decode()
                    if line.startswith("data: "):
                        self.seen.append(json.loads(line[6:]))
        except TimeoutError:
            raise AssertionError(f"not seen in {within} s; seen: {self.seen}") from None


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., Any]]:
    async with chats() as build:
        yield build


@contextlib.asynccontextmanager
async def chats() -> AsyncIterator[Callable[..., Any]]:
    """``make`` outside pytest's fixtures (the conformance drivers use it)."""
    opened: list[tuple[TestServer, aiohttp.ClientSession, ApprovalBroker]] = []
    readers: list[FileReaders] = []

    async def build(
        turns: list[Turn],
        *,
        approval: bool = False,
        clock: Callable[[], float] = time.monotonic,
        room: Room | None = None,
        extra_tools: Sequence[Tool] = (),
        files: FileLimits | None = None,
        lookup: LookupTool | None = None,
        **settings: Any,
    ) -> Chat:
        """``files``: the chat takes files within these limits (real worker processes);
        ``lookup``: the agent's own lookup (the shipped manual, as a fresh clone has it)."""
        ran: list[str] = []

        async def delete(path: str) -> str:
            ran.append(path)
            return f"deleted {path}"

        tools = ToolRegistry()
        tools.add(
            FunctionTool(
                "calculate",
                _calculate,
                "Arithmetic.",
                "calculate[2+2]",
                hints=ToolHints(read_only=True),
            )
        )
        tools.add(FunctionTool("files_delete", delete, "Deletes a file.", "files_delete[a.txt]"))
        for tool in extra_tools:
            tools.add(tool)
        if lookup is not None:
            tools.add(lookup)
        stores = Stores.in_memory()
        intake = None
        if files is not None:
            readers.append(FileReaders(max_parallel=1, parse_seconds=5, parse_memory_mb=256))
            intake = carried(stores.files, files, readers[-1], platform="the web chat")
        broker = ApprovalBroker(InMemoryDecisions(), InMemoryPending())
        model = ScriptedModel(turns)
        agent = Agent(
            model,
            tools,
            stores=stores,
            approve=broker,
            settings=AgentSettings(
                model_timeout=5.0,
                deadline=20.0,
                approval_timeout=20.0,
                approval_tools=frozenset({"files_delete"}) if approval else frozenset(),
            ),
        )
        key, signer = page_signer(_NoSecrets())
        own, policy = split("web", **{"cooldown_seconds": 0.0, **settings})
        chat = WebChat(
            agent,
            stores=stores,
            budgets=TokenBudgets(InMemoryUsageCounters()),
            choices=ChannelChoices(stores.channel_settings, {}, tools, default_model=model.name),
            settings=replace(WebSettings(), **own),
            policy=policy,
            broker=broker,
            secret=key,
            trace_link=lambda trace_id: f"/t/{trace_id}?{signer.query(trace_id)}",
            clock=clock,
            room=room,
            files=intake,
        )
        app = chat.application()
        add_trace_pages(app, traces=stores.traces, signer=signer)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        opened.append((server, http, broker))
        url = f"http://127.0.0.1:{server.port}"
        csrf = ""
        if not chat.settings.token:
            async with http.get(url + "/") as page:
                assert page.status == 200
                csrf = _csrf(await page.text())
        return Chat(chat, url, http, csrf, model, ran)

    try:
        yield build
    finally:
        for server, http, broker in opened:
            await http.close()
            await server.close()
            await broker.aclose()
        for pool in readers:
            await pool.aclose()


class _NoSecrets:
    """The part of ``Config`` that ``page_signer`` reads: no link secret, a week's links."""

    class secrets:
        link_secret = None

    class web:
        link_ttl = 7 * 86400


async def _calculate(expression: str) -> str:
    known = {"17*23+4": "395", "17*23": "391", "391+4": "395", "2+2": "4"}
    return known.get(expression.strip(), "I only know a few sums")


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf-token" content="([0-9a-f]{64})"', page)
    assert found is not None, page[:300]
    return found.group(1)


@pytest.fixture
async def events() -> AsyncIterator[Callable[[Chat], Any]]:
    responses: list[aiohttp.ClientResponse] = []

    async def open_(chat: Chat) -> Events:
        response = await chat.http.get(chat.url + "/api/events")
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        responses.append(response)
        return Events(response)

    yield open_
    for response in responses:
        response.close()


# ---- the page and its session -------------------------------------------------------------


async def test_the_page_sets_a_strict_session_cookie_and_a_strict_policy(make: Any) -> None:
    c: Chat = await make(CALC)
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as fresh, fresh.get(c.url + "/") as page:
        cookie = page.headers["Set-Cookie"]
        policy = page.headers["Content-Security-Policy"]
        html = await page.text()
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # plain http on loopback; web.secure_cookie turns it on
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "unsafe-inline" not in policy and "connect-src 'self'" in policy
    assert '<script src="/static/chat.js" defer></script>' in html
    assert re.search(r"<script>|\son[a-z]+=", html) is None, "no inline script or handler"
    async with c.http.get(c.url + "/static/chat.js") as script:
        assert script.status == 200 and script.content_type == "text/javascript"
        assert "innerHTML" not in await script.text()
    async with c.http.get(c.url + "/static/../chat.py") as missing:
        assert missing.status == 404


async def test_a_post_without_the_token_or_from_elsewhere_is_refused(make: Any) -> None:
    c: Chat = await make(CALC)
    assert (await c.post("/api/ask", {"question": "hi"}, **{"X-CSRF-Token": "0" * 64}))[0] == 403
    assert (await c.post("/api/ask", {"question": "hi"}, Origin="http://evil.example"))[0] == 403
    async with c.http.post(
        c.url + "/api/ask", data="not json", headers={"X-CSRF-Token": c.csrf, "Origin": c.url}
    ) as bad:
        assert bad.status == 400
    async with (
        aiohttp.ClientSession() as stranger,  # no session cookie at all
        stranger.post(
            c.url + "/api/ask", json={"question": "hi"}, headers={"Origin": c.url}
        ) as response,
    ):
        assert response.status == 401
        assert "reload the page" in (await response.json())["error"]
    async with c.http.post(
        c.url + "/api/ask",
        data=b"x" * 70_000,
        headers={"X-CSRF-Token": c.csrf, "Origin": c.url, "Content-Type": "application/json"},
    ) as huge:
        assert huge.status == 413
    assert c.model.calls == [], "nothing refused reached the model"


# ---- a question, live --------------------------------------------------------------------


async def test_a_question_streams_its_steps_then_the_answer_and_links_the_trace(
    make: Any, events: Any
) -> None:
    c: Chat = await make(CALC)
    stream: Events = await events(c)
    assert await c.ask("what is 17*23+4?") == (202, {"ok": True})
    acting = await stream.until(lambda d: bool(d.get("steps")) and d["steps"][0]["action"])
    step = acting["steps"][0]
    assert step["thought"]["text"] == "I will use the calculator."
    assert (step["action"], step["input"]["text"]) == ("calculate", "17*23+4")
    assert not acting["final"], "a step shows before the answer"
    final = await stream.until(lambda d: d.get("final") is True)
    assert final["phase"] == "answered" and final["answer"]["text"] == "17*23+4 = 395"
    assert final["steps"][0]["observation"]["text"] == "395"
    assert final["footer"].startswith("✅ 2 steps")
    states = [d for d in stream.seen if d.get("run") == final["run"]]
    assert len(states) >= 3 and states[0]["phase"] == "starting", "placeholder first"
    async with c.http.get(c.url + final["trace_url"]) as page:
        text = await page.text()
        assert page.status == 200 and "what is 17*23+4?" in text
        assert "<dd>you (web chat)</dd>" not in text  # the session's id is its tooltip
        assert '<dt>where</dt><dd title="web:' in text and '">web chat</dd>' in text
    turns = await c.history()  # a reload shows the conversation so far
    assert [(t["question"]["text"], t["answer"]["text"]) for t in turns] == [
        ("what is 17*23+4?", "17*23+4 = 395")
    ]
    assert turns[0]["trace_url"].split("?")[0] == final["trace_url"].split("?")[0]
    shown = {k: turns[0][k] for k in ("steps", "footer", "sources", "phase", "final")}
    assert shown == {k: final[k] for k in shown}, "a reload draws what the live message ended as"
    assert (await c.post("/api/reset", {}))[0] == 200
    assert await c.history() == []


async def test_the_commands_answer_the_shared_words_as_json_text(make: Any, events: Any) -> None:
    c: Chat = await make(CALC)
    assert await c.post("/api/trace", {}) == (200, {"said": words.NO_TRACE})
    hostile = "<img src=x onerror=alert(1)> what is 17*23+4?"
    stream: Events = await events(c)
    await c.ask(hostile)
    final = await stream.until(lambda d: d.get("final") is True)
    await c.chat.answering.settled()
    status, shown = await c.post("/api/trace", {})
    assert status == 200 and shown["said"] == words.trace_shown(hostile)  # text, never markup
    assert shown["trace"]["id"] == final["run"] and hostile in shown["trace"]["markdown"]
    status, settings = await c.post("/api/settings", {})
    assert status == 200 and "Verbosity" in settings["said"] and "**" not in settings["said"]
    assert await c.post("/api/settings", {"model": ""}) == (200, {"said": words.models_line([])})
    assert (await c.post("/api/settings", {"show": "tools"}))[1]["said"].startswith("Tools: ")
    assert await c.post("/api/settings", {"persona": "Be brief."}) == (
        200, {"said": words.persona_set(9)}
    )  # fmt: skip
    assert await c.post("/api/settings", {"edit": "persona"}) == (
        200, {"said": "", "form": "Be brief."}
    )  # fmt: skip
    status, unknown = await c.post("/api/settings", {"tool": "<b>@everyone</b>"})
    assert status == 200 and unknown["failed"] is True and "<" not in unknown["said"]
    assert await c.post("/api/settings", {"persona": "x" * 70_000}) == (
        413, {"error": words.REQUEST_TOO_BIG, "reason": "question"}
    )  # fmt: skip
    assert await c.post("/api/settings", {"show": "persona"}) == (
        200, {"said": words.persona_shown(9)}
    )  # fmt: skip
    assert (await c.post("/api/usage", {}))[1]["said"].startswith("You have used")
    vote = {"run": final["run"], "vote": "up"}
    assert await c.post("/api/vote", vote) == (200, {"said": words.vote_kept("up")})
    assert (await c.post("/api/vote", {"run": final["run"], "vote": "sideways"}))[0] == 400
    assert await c.post("/api/reset", {}) == (200, {"said": words.RESET_DONE})
    trace = await c.chat.stores.traces.get(final["run"])
    assert trace is not None and [v.value for v in trace.votes] == ["up"]


async def test_an_answer_whose_trace_is_gone_still_shows_after_a_reload(make: Any) -> None:
    c: Chat = await make([])
    assert await c.history() == []  # signs the session in
    (session,) = c.chat.sessions.all()
    await c.chat.stores.history.append(
        session.conversation,
        {"role": "user", "content": QUESTION_PREFIX + "<b>old</b> question"},
        {"role": "assistant", "content": "an answer kept longer than its trace"},
    )
    (turn,) = await c.history()
    assert (turn["question"]["text"], turn["answer"]["text"]) == (
        "<b>old</b> question",
        "an answer kept longer than its trace",
    )
    assert turn["final"] is True and turn["footer"] == "earlier" and "steps" not in turn


async def test_a_page_reloaded_mid_run_gets_its_state_and_the_newest_tabs_stay_open(
    make: Any, events: Any
) -> None:
    c: Chat = await make(
        [Turn("Thought: this will take a long while", chunk_size=4, stall_after=4)]
    )
    first: Events = await events(c)
    await c.ask("a slow one")
    live = await first.until(lambda d: d.get("phase") == "thinking" and d.get("steps"))
    first.response.close()  # the page goes away mid-run
    late: Events = await events(c)  # and comes back: the running message is there
    again = await late.until(lambda d: d.get("run") == live["run"])
    assert not again["final"] and again["steps"][0]["thought"]["text"].startswith("this")
    for _ in range(MAX_STREAMS - 1):
        await events(c)
    newest: Events = await events(c)  # one more than MAX_STREAMS: the oldest open one ends
    async with asyncio.timeout(10):
        assert b"event: bye" in await late.response.content.read()
    assert [len(x.streams) for x in c.chat.sessions.all()] == [MAX_STREAMS]
    late = newest
    await c.post("/api/stop", {"run": live["run"]})
    ended = await late.until(lambda d: d.get("final") is True)
    assert ended["phase"] == "cancelled"
    (cookie,) = [m.value for m in c.http.cookie_jar if m.key == "reactbot_session"]
    session = c.chat.sessions.from_cookie(cookie)
    assert session is not None and session.live == {}, "a finished message is history's"


async def test_stop_ends_a_slow_run_and_only_its_own_session_may(make: Any, events: Any) -> None:
    c: Chat = await make(
        [Turn("Thought: this will take a long while", chunk_size=4, stall_after=4)]
    )
    stream: Events = await events(c)
    await c.ask("a slow one")
    live = await stream.until(lambda d: d.get("phase") == "thinking" and d.get("steps"))
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as other:
        async with other.get(c.url + "/") as page:
            token = _csrf(await page.text())
        async with other.post(
            c.url + "/api/stop",
            json={"run": live["run"]},
            headers={"X-CSRF-Token": token, "Origin": c.url},
        ) as refused:
            assert refused.status == 403
    assert await c.post("/api/stop", {"run": live["run"]}) == (200, {"ok": True})
    final = await stream.until(lambda d: d.get("final") is True)
    assert final["phase"] == "cancelled" and final["outcome"].startswith("⏹️ Stopped by you")
    assert (await c.post("/api/stop", {"run": live["run"]}))[0] == 409  # no longer running


async def test_refusals_come_back_in_words(make: Any) -> None:
    c: Chat = await make(CALC + CALC, cooldown_seconds=60.0)
    status, body = await c.ask("   ")
    assert status == 400 and body["error"] == "Type a question first."
    assert (await c.ask("what is 17*23+4?"))[0] == 202
    status, body = await c.ask("and again?")
    assert status == 429 and body["reason"] == "cooldown" and "ask again in" in body["error"]
    status, body = await c.ask("x" * 20_000)
    assert status == 400 and "shorten it" in body["error"]


# ---- approvals ----------------------------------------------------------------------------


DELETE = [
    Turn("Thought: I will delete it.\nAction: files_delete[report.txt]"),
    Turn("Thought: done.\nFinal Answer: It is gone."),
]


async def test_approve_runs_the_action_and_deny_tells_the_model_why(make: Any, events: Any) -> None:
    c: Chat = await make(DELETE + DELETE, approval=True)
    stream: Events = await events(c)
    await c.ask("delete report.txt")
    waiting = await stream.until(lambda d: d.get("pending") is not None)
    pending = waiting["pending"]
    assert (pending["tool"], pending["input"]["text"]) == ("files_delete", "report.txt")
    decide = {"run": waiting["run"], "step": pending["step"], "call": pending["call"]}
    status, body = await c.post("/api/decide", {**decide, "verdict": "maybe"})
    assert status == 400
    assert await c.post("/api/decide", {**decide, "verdict": "approve"}) == (200, {"ok": True})
    final = await stream.until(lambda d: d.get("final") is True and d["run"] == waiting["run"])
    assert c.ran == ["report.txt"] and final["steps"][0]["approval"].startswith(
        "✅ approved by you"
    )

    await c.ask("delete report.txt")
    second = await stream.until(
        lambda d: d.get("pending") is not None and d["run"] != waiting["run"]
    )
    decide = {"run": second["run"], "step": 1, "call": 0}
    reason = {"verdict": "deny", "reason": "keep it, it is the only copy"}
    assert await c.post("/api/decide", {**decide, **reason}) == (200, {"ok": True})
    await stream.until(lambda d: d.get("final") is True and d["run"] == second["run"])
    assert c.ran == ["report.txt"], "the denied action did not run"
    sent = "\n".join(str(m["content"]) for m in c.model.calls[3].messages)
    assert "keep it, it is the only copy" in sent
    status, body = await c.post("/api/decide", {**decide, "verdict": "approve"})
    assert status == 409 and "already decided" in body["error"]


# ---- hostile text and sign-in -------------------------------------------------------------


async def test_hostile_text_arrives_as_bounded_data(make: Any, events: Any) -> None:
    hostile = "<script>alert(1)</script> \u202egnp.exe [x](javascript:alert(1)) " + "y" * 60_000
    c: Chat = await make([Turn(f"Thought: {hostile}\nFinal Answer: {hostile}", chunk_size=5000)])
    stream: Events = await events(c)
    await c.ask("<img src=x onerror=alert(1)>")
    final = await stream.until(lambda d: d.get("final") is True)
    assert final["question"]["text"] == "<img src=x onerror=alert(1)>"  # text, for textContent
    answer = final["answer"]
    assert (
        answer["text"].startswith("<script>alert(1)</script> \ufffdgnp.exe") and answer["cut"] > 0
    )
    assert "\u202e" not in json.dumps(final, ensure_ascii=False)
    assert len(answer["text"]) <= 40_000


async def test_a_public_address_needs_a_token_and_people_sign_in_with_it(make: Any) -> None:
    with pytest.raises(WebChatRefused, match="REACTBOT_WEB_TOKEN"):
        await make(CALC, host="0.0.0.0")
    c: Chat = await make(CALC, host="0.0.0.0", token="s3cret-token")
    async with c.http.get(c.url + "/") as page:
        html = await page.text()
        assert 'action="/signin"' in html and "csrf-token" not in html
        assert "Set-Cookie" not in page.headers
    async with c.http.post(
        c.url + "/signin", data={"token": "wrong"}, headers={"Origin": c.url}
    ) as wrong:
        assert wrong.status == 403 and "not right" in await wrong.text()
    async with c.http.post(
        c.url + "/signin", data={"token": "s3cret-token"}, headers={"Origin": "http://evil.example"}
    ) as elsewhere:
        assert elsewhere.status == 403
    async with c.http.post(
        c.url + "/signin", data={"token": "s3cret-token"}, headers={"Origin": c.url}
    ) as right:
        assert right.status == 200 and "csrf-token" in await right.text()  # redirected to /
    async with c.http.get(c.url + "/api/history") as signed_in:
        assert signed_in.status == 200


def test_is_loopback() -> None:
    from adapters.web.hosts import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("127.0.1.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")


async def test_verbosity_answer_shows_no_steps_and_it_is_kept_for_the_session(
    make: Any, events: Any
) -> None:
    c: Chat = await make(CALC)
    assert (await c.post("/api/verbosity", {"verbosity": "loud"}))[0] == 400
    assert await c.post("/api/verbosity", {"verbosity": "answer"}) == (
        200,
        {"said": words.now_sees("answer")},
    )
    stream: Events = await events(c)
    await c.ask("what is 17*23+4?")
    final = await stream.until(lambda d: d.get("final") is True)
    assert final["answer"]["text"] == "17*23+4 = 395" and "steps" not in final
    assert all("steps" not in d and d["verbosity"] == "answer" for d in stream.seen)
    assert next(s["status"] for s in stream.seen if not s["final"]).startswith("⏳ Working on")
    async with c.http.get(c.url + "/") as page:  # the page's selector shows the choice
        assert 'data-current="answer"' in await page.text()


async def test_an_idle_stream_is_closed(make: Any, events: Any) -> None:
    c: Chat = await make(CALC, idle_seconds=0.2)
    stream: Events = await events(c)
    async with asyncio.timeout(10):
        assert b"event: bye" in await stream.response.content.read()


async def test_edit_runs_the_edited_input_and_always_allows_the_tool_here(
    make: Any, events: Any
) -> None:
    c: Chat = await make(DELETE + DELETE + DELETE, approval=True)
    stream: Events = await events(c)
    await c.ask("delete report.txt")
    first = await stream.until(lambda d: d.get("pending") is not None)
    decide = {"run": first["run"], "step": 1, "call": 0}
    edited = {**decide, "verdict": "edit", "input": "report-old.txt"}
    assert await c.post("/api/decide", edited) == (200, {"ok": True})
    await stream.until(lambda d: d.get("final") is True and d["run"] == first["run"])
    assert c.ran == ["report-old.txt"], "the edited input ran, not the model's"

    await c.ask("delete report.txt")
    second = await stream.until(lambda d: d.get("pending") is not None and d["run"] != first["run"])
    assert second["pending"]["remember"], "Allow in this conversation is offered"
    always = {"run": second["run"], "step": 1, "call": 0, "verdict": "always"}
    assert await c.post("/api/decide", always) == (200, {"ok": True})
    await stream.until(lambda d: d.get("final") is True and d["run"] == second["run"])

    await c.ask("delete report.txt")  # allowed for this conversation: no question asked
    third = await stream.until(
        lambda d: d.get("final") is True and d["run"] not in (first["run"], second["run"])
    )
    assert c.ran == ["report-old.txt", "report.txt", "report.txt"]
    assert "allowed for this conversation" in third["steps"][0]["approval"]
