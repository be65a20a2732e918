"""Files attached in the web chat, over real HTTP (the browser's attach control is in
tests/integration/test_web_chat_browser.py): a question sent as a form with its files goes
through the intake every surface uses (real worker processes, ``files.*`` limits, the same
refusal lines), its live message and Stop shown while they are read; the Origin, host,
session and CSRF checks hold on it; hostile names come back made safe; /reset drops them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

import bot
from adapters.web.uploads import CHUNK, QUESTION_BYTES
from adapters.words import FILES_OFF
from core.files import FileLimits, safe_name
from core.knowledge import LookupTool
from core.scripted import Turn
from tests.integration.test_web_chat import Chat, events, make  # noqa: F401 - fixtures

NOTE = b"The launch code for project Bluebird is AMBER-7734."
LOOKUP = [
    Turn("Thought: The note may say.\nAction: lookup[launch code for project Bluebird]"),
    Turn("Thought: It does.\nFinal Answer: AMBER-7734"),
]
SMALL = FileLimits(max_bytes=1000, max_per_question=2)


async def ask_with(
    c: Chat, question: str, files: list[tuple[str, bytes]], *, ident: str = "", **headers: str
) -> tuple[int, dict[str, Any]]:
    """The page's request: a form with the question, its id and each file, the CSRF header."""
    form = aiohttp.FormData(quote_fields=False)  # names as a browser sends them
    form.add_field("question", question)
    if ident:
        form.add_field("id", ident)
    for name, data in files:
        form.add_field("file", data, filename=name, content_type="application/octet-stream")
    sent = {"X-CSRF-Token": c.csrf, "Origin": c.url, **headers}
    async with c.http.post(c.url + "/api/ask", data=form, headers=sent) as response:
        return response.status, await response.json()


async def test_a_one_file_question_finds_its_file_with_the_shipped_manual_present(
    make: Any,  # noqa: F811 - the fixture
    events: Any,  # noqa: F811 - the fixture
) -> None:
    manual = LookupTool(manual=Path(bot.__file__).parent / "knowledge")
    c: Chat = await make(LOOKUP, files=FileLimits(), lookup=manual)
    stream = await events(c)
    status, _ = await ask_with(c, "What is the launch code for project Bluebird?", [
        ("notes.txt", NOTE)
    ])  # fmt: skip
    assert status == 202
    final = await stream.until(lambda d: d.get("type") == "run" and d.get("final"), within=20)
    assert "AMBER-7734" in json_text(final)
    (trace,) = await c.chat.stores.traces.list(conversation_of(c))
    (step, *_) = trace.steps
    assert step.observation is not None
    assert step.observation.startswith(f"1. notes.txt\n{NOTE.decode()}")
    assert step.sources[0] == "notes.txt"
    c.model.assert_complete()


async def test_a_form_sent_twice_with_its_id_is_one_question(
    make: Any,  # noqa: F811 - the fixture
    events: Any,  # noqa: F811 - the fixture
) -> None:
    manual = LookupTool(manual=Path(bot.__file__).parent / "knowledge")
    c: Chat = await make(LOOKUP, files=FileLimits(), lookup=manual)
    stream = await events(c)
    sent = ("What is the launch code for project Bluebird?", [("notes.txt", NOTE)])
    assert await ask_with(c, *sent, ident="question-1") == (202, {"ok": True})
    assert await ask_with(c, *sent, ident="question-1") == (
        202,
        {"ok": True, "dropped": "duplicate"},
    )
    await stream.until(lambda d: d.get("type") == "run" and d.get("final"), within=20)
    assert len(await c.chat.stores.traces.list(conversation_of(c))) == 1
    c.model.assert_complete()


async def test_refused_files_get_the_intakes_own_lines_and_the_question_is_answered(
    make: Any,  # noqa: F811 - the fixture
    events: Any,  # noqa: F811 - the fixture
) -> None:
    turns = [Turn("Thought: nothing to read.\nFinal Answer: answered anyway")]
    c: Chat = await make(turns, files=SMALL)
    stream = await events(c)
    hostile = "../../<@everyone> [click](javascript:alert(1))\u202e.txt"
    status, _ = await ask_with(
        c,
        "read these",
        [
            (hostile, b"\xff\xfe\xfa\x80 not text"),
            ("big.txt", b"x" * 1001),
            ("tool.exe", b"MZ"),
        ],
    )
    assert status == 202
    note = await stream.until(lambda d: d.get("type") == "note", within=20)
    lines = json_text(note)
    assert f"⚠️ {safe_name(hostile)}: not UTF-8 text" in lines
    assert "⚠️ big.txt: larger than 1,000 bytes." in lines
    assert "⚠️ tool.exe: not read, at most 2 files per question." in lines
    assert "<@everyone>" not in lines and "](javascript" not in lines
    assert "\u202e" not in lines and "../" not in lines
    final = await stream.until(lambda d: d.get("type") == "run" and d.get("final"), within=20)
    assert "answered anyway" in json_text(final)
    assert await c.chat.stores.files.load(conversation_of(c)) == []


async def test_the_checks_hold_on_a_form_too(make: Any) -> None:  # noqa: F811 - the fixture
    c: Chat = await make(LOOKUP, files=SMALL)
    files = [("notes.txt", NOTE)]
    assert (await ask_with(c, "q", files, **{"X-CSRF-Token": "0" * 64}))[0] == 403
    assert (await ask_with(c, "q", files, Origin="http://evil.example"))[0] == 403
    assert (await ask_with(c, "q", files, Host="evil.example"))[0] == 421
    async with aiohttp.ClientSession() as stranger:  # no session cookie
        form = aiohttp.FormData()
        form.add_field("file", NOTE, filename="notes.txt")
        async with stranger.post(
            c.url + "/api/ask", data=form, headers={"Origin": c.url}
        ) as response:
            assert response.status == 401
    # A body longer than a question's files may hold is refused before it is read.
    too_long = b"x" * (2 * 1000 + QUESTION_BYTES + CHUNK)
    status, body = await ask_with(c, "q", [("a.txt", too_long)])
    assert status == 413 and "At most 2 files of 1,000 bytes each" in body["error"]
    async with c.http.post(
        c.url + "/api/ask",
        data=b"--x\r\nnot a form",
        headers={
            "X-CSRF-Token": c.csrf,
            "Origin": c.url,
            "Content-Type": "multipart/form-data; boundary=x",
        },
    ) as broken:
        assert broken.status == 400
    assert c.model.calls == [], "nothing refused reached the model"


async def test_a_chat_without_files_says_so(make: Any) -> None:  # noqa: F811 - the fixture
    c: Chat = await make(LOOKUP)  # files.enabled: false
    status, body = await ask_with(c, "q", [("notes.txt", NOTE)])
    assert (status, body["error"]) == (400, FILES_OFF)
    assert c.model.calls == []


async def test_reset_drops_the_conversations_files(
    make: Any,  # noqa: F811 - the fixture
    events: Any,  # noqa: F811 - the fixture
) -> None:
    c: Chat = await make(LOOKUP, files=FileLimits())
    stream = await events(c)
    assert (await ask_with(c, "the code?", [("notes.txt", NOTE)]))[0] == 202
    await stream.until(lambda d: d.get("type") == "run" and d.get("final"), within=20)
    assert [p.file for p in await c.chat.stores.files.load(conversation_of(c))] == ["notes.txt"]
    assert (await c.post("/api/reset", {}))[0] == 200
    assert await c.chat.stores.files.load(conversation_of(c)) == []


def conversation_of(c: Chat) -> str:
    (session,) = c.chat.sessions.all()
    return session.conversation


def json_text(data: dict[str, Any]) -> str:
    import json

    return json.dumps(data, ensure_ascii=False)


async def test_any_form_body_gets_one_clear_answer(make: Any) -> None:  # noqa: F811 - the fixture
    """A valid form cut, spliced and garbled at random (seeded): every answer is a refusal
    in JSON or an admitted question (a garbled boundary can leave text in the question),
    never a server error, and nothing hangs."""
    import random

    c: Chat = await make([], files=SMALL, cooldown_seconds=0.0, max_runs_per_user=1000)
    form = (
        b'--b\r\nContent-Disposition: form-data; name="question"\r\n\r\n\r\n'
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
        b"Content-Type: text/plain\r\n\r\nhello\r\n--b--\r\n"
    )
    rng = random.Random(42)
    headers = {
        "X-CSRF-Token": c.csrf,
        "Origin": c.url,
        "Content-Type": "multipart/form-data; boundary=b",
    }
    for _ in range(150):
        body = bytearray(form)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(body) + 1)
            match rng.randrange(3):
                case 0:
                    del body[at : at + rng.randint(1, 20)]
                case 1:
                    body[at:at] = rng.randbytes(rng.randint(1, 20))
                case _:
                    body[at:at] = rng.choice([b"--b", b"\r\n", b'"', b"--b--", b"\r\n\r\n"])
        async with c.http.post(c.url + "/api/ask", data=bytes(body), headers=headers) as r:
            assert r.status in (202, 400, 413), (r.status, bytes(body))
            assert r.status == 202 or "error" in await r.json()
