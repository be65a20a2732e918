"""The fake Discord refuses what Discord refuses, and discord.py reads its answers as it reads
Discord's: these tests drive discord.py's own HTTP client (and its webhook adapter, which
interactions use) over real HTTP against the fake, and the gateway over a real websocket."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():  # discord.py imports the deprecated audioop module
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord

import asyncio
import contextlib
import io
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from discord.http import HTTPClient, Route, handle_message_parameters
from discord.webhook.async_ import (
    AsyncWebhookAdapter,
    interaction_message_response_params,
    interaction_response_params,
)

from tests.fakes.discord_limits import invalid_form
from tests.fakes.discord_server import (
    APP_ID,
    CHANNEL_ID,
    CHANNEL_WRITES,
    TOKEN,
    FakeDiscord,
    ManualClock,
    bucket_of,
)

Json = dict[str, Any]


@contextlib.asynccontextmanager
async def fake_discord(**options: Any) -> AsyncIterator[FakeDiscord]:
    fake = FakeDiscord(**options)
    fake.add_channel(CHANNEL_ID)
    await fake.start()
    saved = Route.BASE  # discord.py's REST base is a class attribute
    Route.BASE = fake.api_base_url
    try:
        yield fake
    finally:
        Route.BASE = saved
        await fake.stop()


@contextlib.asynccontextmanager
async def logged_in(token: str = TOKEN) -> AsyncIterator[HTTPClient]:
    http = HTTPClient(asyncio.get_running_loop(), max_ratelimit_timeout=30.0)
    try:
        await http.static_login(token)
        yield http
    finally:
        await http.close()


async def send(http: HTTPClient, **message: Any) -> Json:
    with handle_message_parameters(**message) as params:
        return await http.send_message(CHANNEL_ID, params=params)  # type: ignore[return-value]


async def refused(make: Callable[[], Any]) -> discord.HTTPException:
    with pytest.raises(discord.HTTPException) as caught:
        await make()
    return caught.value


def raw_message(http: HTTPClient, body: Json) -> Any:
    """A message body discord.py would refuse to build itself, sent by its HTTP client."""
    route = Route("POST", "/channels/{channel_id}/messages", channel_id=CHANNEL_ID)
    return http.request(route, json=body)


# ---- message bodies -----------------------------------------------------------------------


async def test_content_over_2000_characters_is_invalid_form_body() -> None:
    async with fake_discord() as fake, logged_in() as http:
        await send(http, content="x" * 2000)
        error = await refused(lambda: send(http, content="x" * 2001))
        assert (error.status, error.code) == (400, 50035)
        assert error.text == "Invalid Form Body\nIn content: Must be 2000 or fewer in length."
        assert fake.calls[-1].status == 400
        created = await send(http, content="short")
        edit = handle_message_parameters(content="y" * 2001)
        error = await refused(lambda: http.edit_message(CHANNEL_ID, created["id"], params=edit))
        assert error.code == 50035 and "In content: Must be 2000" in error.text
        assert fake.messages[int(created["id"])]["content"] == "short"


async def test_embed_limits_each_field_and_6000_in_total() -> None:
    async with fake_discord(), logged_in() as http:
        padded = discord.Embed(description="d" * 4096 + "   ")  # trimmed before counting
        await send(http, embeds=[padded])
        error = await refused(lambda: send(http, embeds=[discord.Embed(description="d" * 4097)]))
        assert error.text.endswith("In embeds.0.description: Must be 4096 or fewer in length.")
        field = discord.Embed().add_field(name="n", value="v" * 1025)
        error = await refused(lambda: send(http, embeds=[field]))
        assert error.text.endswith("In embeds.0.fields.0.value: Must be 1024 or fewer in length.")
        halves = [discord.Embed(description="d" * 3001), discord.Embed(description="d" * 3000)]
        error = await refused(lambda: send(http, embeds=halves))
        assert error.text.endswith("In embeds: Embed size exceeds maximum size of 6000")
        eleven = [{"description": "e"} for _ in range(11)]
        error = await refused(lambda: raw_message(http, {"embeds": eleven}))
        assert error.text.endswith("In embeds: Must be 10 or fewer in length.")


async def test_component_limits() -> None:
    def button(label: str = "ok", custom_id: str = "id") -> Json:
        return {"type": 2, "style": 1, "label": label, "custom_id": custom_id}

    def rows(*items: list[Json]) -> Json:
        return {"content": "c", "components": [{"type": 1, "components": i} for i in items]}

    async with fake_discord(), logged_in() as http:
        await raw_message(http, rows(*[[button() for _ in range(5)] for _ in range(5)]))
        cases = [
            (rows([button("l" * 81)]), "In components.0.components.0.label: Must be 80 or"),
            (rows([button(custom_id="c" * 101)]), "custom_id: Must be between 1 and 100 in"),
            (rows([button(custom_id="")]), "custom_id: Must be between 1 and 100 in length."),
            (rows([button() for _ in range(6)]), "In components.0.components: Must be 5 or"),
            (rows(*[[button()] for _ in range(6)]), "In components: Must be 5 or fewer"),
        ]
        for body, expected in cases:
            error = await refused(lambda body=body: raw_message(http, body))
            assert error.code == 50035 and expected in error.text, error.text


def card(*texts: str) -> discord.ui.LayoutView:
    view = discord.ui.LayoutView()
    view.add_item(discord.ui.Container(*[discord.ui.TextDisplay[Any](t) for t in texts]))
    return view


async def test_components_v2_messages_hold_components_only_within_40_and_4000() -> None:
    v2 = 1 << 15
    async with fake_discord() as fake, logged_in() as http:
        created = await send(http, view=card("a" * 2000, "b" * 1999))  # discord.py sets the flag
        assert created["flags"] & v2 and created["content"] == ""
        error = await refused(lambda: send(http, content="hi", view=card("x")))
        assert error.code == 50035 and error.text == (
            "Invalid Form Body\nIn content: The 'content' field cannot be used when using "
            "MessageFlags.IS_COMPONENTS_V2"
        )
        error = await refused(lambda: send(http, view=card("a" * 2000, "b" * 2001)))
        assert error.text.endswith("In components: Must be 4000 or fewer in length.")
        texts = [{"type": 10, "content": "x"} for _ in range(40)]
        body = {"flags": v2, "components": [{"type": 17, "components": texts}]}
        error = await refused(lambda: raw_message(http, body))
        assert error.text.endswith("In components: Must be 40 or fewer in length.")
        section = {"type": 9, "components": [{"type": 10, "content": "x"}]}
        error = await refused(lambda: raw_message(http, {"flags": v2, "components": [section]}))
        assert error.text.endswith("In components.0.accessory: This field is required")
        # an edit cannot add content to a card, and its flags cannot take the card's away
        edit = handle_message_parameters(content="plain")
        error = await refused(lambda: http.edit_message(CHANNEL_ID, created["id"], params=edit))
        assert "The 'content' field cannot be used" in error.text
        flags_only = handle_message_parameters(flags=discord.MessageFlags(suppress_embeds=True))
        await http.edit_message(CHANNEL_ID, created["id"], params=flags_only)
        assert fake.messages[int(created["id"])]["flags"] == v2 | 4


async def test_all_errors_of_a_body_come_back_in_one_tree() -> None:
    async with fake_discord(), logged_in() as http:
        body = {"content": "x" * 2001, "embeds": [{"title": "t" * 257}]}
        error = await refused(lambda: raw_message(http, body))
        assert error._errors == {  # what discord.py keeps of the body's ``errors``
            "content": {
                "_errors": [
                    {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}
                ]
            },
            "embeds": {
                "0": {
                    "title": {
                        "_errors": [
                            {
                                "code": "BASE_TYPE_MAX_LENGTH",
                                "message": "Must be 256 or fewer in length.",
                            }
                        ]
                    }
                }
            },
        }


async def test_empty_messages_and_more_than_ten_files() -> None:
    async with fake_discord(), logged_in() as http:
        error = await refused(lambda: send(http, content="   "))
        assert (error.status, error.code, error.text) == (
            400,
            50006,
            "Cannot send an empty message",
        )
        created = await send(http, content="text")
        empty = handle_message_parameters(content=None)
        error = await refused(lambda: http.edit_message(CHANNEL_ID, created["id"], params=empty))
        assert error.code == 50006

        def files(n: int) -> list[discord.File]:
            return [discord.File(io.BytesIO(b"x"), filename=f"f{i}.txt") for i in range(n)]

        await send(http, files=files(10))
        error = await refused(lambda: send(http, files=files(11)))
        assert (error.status, error.code) == (400, 30015)


async def test_thread_names_are_1_to_100_characters_and_one_thread_per_message() -> None:
    async with fake_discord() as fake, logged_in() as http:
        message = int((await send(http, content="m"))["id"])

        def thread(name: str) -> Any:
            return http.start_thread_with_message(
                CHANNEL_ID, message, name=name, auto_archive_duration=1440
            )

        for name in ("", "n" * 101):
            error = await refused(lambda name=name: thread(name))
            assert error.text == "Invalid Form Body\nIn name: Must be between 1 and 100 in length."
        await thread("n" * 100)
        error = await refused(lambda: thread("again"))
        assert (error.code, error.status) == (160004, 400)
        fake.refuse_threads()
        other = int((await send(http, content="m2"))["id"])
        with pytest.raises(discord.Forbidden) as caught:
            await http.start_thread_with_message(
                CHANNEL_ID, other, name="t", auto_archive_duration=1440
            )
        assert (caught.value.code, caught.value.text) == (50013, "Missing Permissions")


async def test_a_scripted_refusal_hits_only_the_matching_request_once() -> None:
    async with fake_discord() as fake, logged_in() as http:
        created = await send(http, content="live")
        errors = {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "no"}]}}
        fake.refuse_next(
            "PATCH", "/messages/", invalid_form(errors), when=lambda b: "final" in b["content"]
        )

        def edit(text: str) -> Any:
            return http.edit_message(
                CHANNEL_ID, created["id"], params=handle_message_parameters(content=text)
            )

        await edit("still live")
        error = await refused(lambda: edit("final"))
        assert (error.code, error.text) == (50035, "Invalid Form Body\nIn content: no")
        await edit("final")


# ---- auth and rate limits ----------------------------------------------------------------


async def test_a_wrong_token_is_401_and_discord_py_calls_it_a_login_failure() -> None:
    async with fake_discord() as fake:
        with pytest.raises(discord.LoginFailure) as caught:
            async with logged_in("not-the-token"):
                pass
        cause = caught.value.__cause__
        assert isinstance(cause, discord.HTTPException)
        assert (cause.status, cause.code, cause.text) == (401, 0, "401: Unauthorized")
        assert [(c.path, c.status) for c in fake.calls] == [("/users/@me", 401)]


async def test_every_answer_carries_its_bucket_and_discord_py_waits_for_the_reset() -> None:
    async with fake_discord(channel_limit=(2, 0.6)) as fake, logged_in() as http:
        async with aiohttp.ClientSession() as session:
            url = f"{fake.api_base_url}/users/@me"
            async with session.get(url, headers={"Authorization": f"Bot {TOKEN}"}) as answer:
                headers = answer.headers
        for name in ("Limit", "Remaining", "Reset", "Reset-After", "Bucket"):
            assert f"X-RateLimit-{name}" in headers
        assert "X-RateLimit-Scope" not in headers  # only on 429s
        started = time.monotonic()
        for n in range(3):
            await send(http, content=f"m{n}")
        writes = [c for c in fake.calls if c.method == "POST"]
        assert [c.status for c in writes] == [200, 200, 200]
        assert fake.rate_limited == 0  # discord.py saw Remaining 0 and slept until the reset
        assert writes[2].at - started >= 0.6 - 0.05


async def test_a_global_429_holds_every_bot_request_but_not_interactions() -> None:
    async with fake_discord() as fake, logged_in() as http:
        fake.rate_limit_global(0.5)
        await asyncio.gather(send(http, content="a"), send(http, content="b"))
        assert fake.globally_limited >= 1
        sent = [c for c in fake.calls if c.status == 200 and c.method == "POST"]
        # the fake's own record: both went through only once the global window had ended
        assert len(sent) == 2 and all(c.at >= fake.global_limit_ends for c in sent)

        fake.rate_limit_global(30.0)
        async with aiohttp.ClientSession() as session:
            async with session.post(
                f"{fake.api_base_url}/channels/{CHANNEL_ID}/messages",
                json={"content": "c"},
                headers={"Authorization": f"Bot {TOKEN}"},
            ) as answer:
                body, headers = await answer.json(), answer.headers
            assert answer.status == 429
            assert body == {
                "message": "You are being rate limited.",
                "retry_after": 30.0,
                "global": True,
            }
            assert headers["X-RateLimit-Global"] == "true" and headers["Retry-After"] == "30"
            assert headers["X-RateLimit-Scope"] == "global" and headers["Via"]
            payload = fake.interaction_create("ask", {"question": "q"})
            await AsyncWebhookAdapter().create_interaction_response(
                int(payload["id"]),
                payload["token"],
                session=session,
                params=interaction_response_params(5),
            )


# ---- interactions -------------------------------------------------------------------------


async def test_interaction_tokens_expire_and_the_first_answer_has_three_seconds() -> None:
    clock = ManualClock()  # Discord's own windows (3 s, 15 min), moved by hand
    async with fake_discord(clock=clock) as fake:
        adapter = AsyncWebhookAdapter()
        async with aiohttp.ClientSession() as session:

            async def defer(payload: Json) -> Any:
                return await adapter.create_interaction_response(
                    int(payload["id"]),
                    payload["token"],
                    session=session,
                    params=interaction_response_params(5),
                )

            async def edit(payload: Json, text: str) -> Any:
                return await adapter.edit_original_interaction_response(
                    APP_ID, payload["token"], session=session, payload={"content": text}
                )

            late = fake.interaction_create("ask", {"question": "late"})
            clock.advance(3.01)
            with pytest.raises(discord.NotFound) as missed:
                await defer(late)
            assert (missed.value.code, missed.value.text) == (10062, "Unknown interaction")
            error = await refused(lambda: edit(late, "x"))  # never acknowledged: token is dead
            assert (error.status, error.code) == (401, 50027)

            payload = fake.interaction_create("ask", {"question": "q"})
            await defer(payload)
            error = await refused(lambda: defer(payload))
            assert (error.status, error.code) == (400, 40060)
            await edit(payload, "in time")
            too_long = await refused(lambda: edit(payload, "x" * 2001))
            assert too_long.code == 50035
            callback = interaction_message_response_params(type=4, content="x" * 2001)
            other = fake.interaction_create("ask", {"question": "other"})
            error = await refused(
                lambda: adapter.create_interaction_response(
                    int(other["id"]), other["token"], session=session, params=callback
                )
            )
            assert (
                error.text == "Invalid Form Body\nIn data.content: Must be 2000 or fewer in length."
            )
            clock.advance(14 * 60)
            await edit(payload, "acknowledged: the token lives 15 minutes")
            clock.advance(60)
            error = await refused(lambda: edit(payload, "too late"))
            assert (error.status, error.code, error.text) == (401, 50027, "Invalid Webhook Token")


# ---- gateway ------------------------------------------------------------------------------


class Gateway:
    """A bare websocket client, to see exactly what the fake gateway sends."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws

    async def send(self, op: int, d: Any) -> None:
        await self.ws.send_str(json.dumps({"op": op, "d": d}))

    async def receive(self) -> Json:
        msg = await asyncio.wait_for(self.ws.receive(), 2.0)
        if msg.type != aiohttp.WSMsgType.TEXT:
            return {"closed": self.ws.close_code}
        frame: Json = json.loads(msg.data)
        return frame


@contextlib.asynccontextmanager
async def gateway(url: str) -> AsyncIterator[Gateway]:
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        client = Gateway(ws)
        assert (await client.receive())["op"] == 10
        yield client


def identify(token: str = TOKEN) -> Json:
    return {"token": token, "intents": 0, "properties": {}, "shard": [0, 1]}


async def test_gateway_refuses_a_wrong_token_with_4004() -> None:
    async with fake_discord() as fake, gateway(fake.gateway_url) as client:
        await client.send(2, identify("wrong"))
        assert await client.receive() == {"closed": 4004}


async def test_resume_replays_what_the_session_missed_then_resumed() -> None:
    async with fake_discord() as fake:
        async with gateway(fake.gateway_url) as client:
            await client.send(2, identify())
            ready = await client.receive()
            assert (ready["t"], ready["s"]) == ("READY", 1)
            assert ready["d"]["resume_gateway_url"] == fake.resume_gateway_url
            session_id = ready["d"]["session_id"]
            assert (await client.receive())["t"] == "GUILD_CREATE"
            await fake.reconnect_request()
            assert await client.receive() == {"op": 7, "d": None}
            await fake.dispatch("MESSAGE_CREATE", fake.message_create("missed one"))
            await client.ws.close(code=4000)  # not 1000: the session stays resumable
        await fake.dispatch("MESSAGE_CREATE", fake.message_create("missed two"))
        async with gateway(fake.resume_gateway_url) as client:
            await client.send(6, {"token": TOKEN, "session_id": session_id, "seq": 2})
            replayed = [await client.receive() for _ in range(3)]
        assert [(f["t"], f["s"]) for f in replayed] == [
            ("MESSAGE_CREATE", 3),
            ("MESSAGE_CREATE", 4),
            ("RESUMED", 5),
        ]
        assert "missed one" in replayed[0]["d"]["content"]
        assert fake.resumes == [("/resume-gateway", 2)]


async def test_invalid_sessions_and_identify_spacing() -> None:
    async with fake_discord(identify_interval=0.3) as fake:
        async with gateway(fake.gateway_url) as client:
            await client.send(2, identify())
            session_id = (await client.receive())["d"]["session_id"]
            await client.receive()
            await fake.invalidate_session(resumable=False)
            assert await client.receive() == {"op": 9, "d": False}
        async with gateway(fake.resume_gateway_url) as client:
            await client.send(6, {"token": TOKEN, "session_id": session_id, "seq": 2})
            assert await client.receive() == {"op": 9, "d": False}  # the session is gone
        async with gateway(fake.gateway_url) as client:
            await client.send(2, identify())
            assert await client.receive() == {"op": 9, "d": False}  # too soon after the last
        await asyncio.sleep(0.3)
        async with gateway(fake.gateway_url) as client:
            await client.send(2, identify())
            assert (await client.receive())["t"] == "READY"
            await client.receive()
            await fake.invalidate_session(resumable=True)
            assert await client.receive() == {"op": 9, "d": True}
            assert len(fake.sessions) == 1  # still resumable


async def test_typing_is_204_in_a_known_channel_and_unknown_channel_elsewhere() -> None:
    async with fake_discord() as fake, logged_in() as http:
        assert await http.send_typing(CHANNEL_ID) == ""  # 204, no body
        with pytest.raises(discord.NotFound) as refused:
            await http.send_typing(CHANNEL_ID + 99)
        assert refused.value.code == 10003 and "Unknown Channel" in refused.value.text
        assert fake.typing == [CHANNEL_ID]
    # a route of its own: typing does not spend the channel's message writes
    assert bucket_of("POST", ["channels", "1", "typing"])[0] != CHANNEL_WRITES


def test_the_retry_after_header_and_body_say_one_wait() -> None:
    # until - now for a 30 s limit can be a hair above 30: the header must still say 30
    from tests.fakes.discord_server import _wait_of

    assert _wait_of(30.0 + 1e-12) == ("30", 30.0)
    assert _wait_of(0.5004) == ("1", 0.5)
    assert _wait_of(2.0) == ("2", 2.0)
