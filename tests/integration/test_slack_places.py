"""Whether a Slack channel is closed, through the real ``AsyncWebClient`` and the strict
fake's ``conversations.info``: remembered per channel for its TTL (a channel made private is
read as closed once it passes), and closed whenever Slack will not say."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.places import PLACES_KEPT, SlackPlaces
from tests.fakes.slack_server import TOKEN, FakeSlack


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


@pytest.fixture
async def client(fake: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    async with aiohttp.ClientSession() as session:
        yield AsyncWebClient(token=TOKEN, base_url=fake.base_url, session=session)


async def test_a_channel_made_private_reads_closed_once_its_answer_is_older_than_the_ttl(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    clock = Clock()
    places = SlackPlaces(client, ttl=300.0, clock=clock)
    assert await places.closed("C1") is False
    fake.private_channels.add("C1")  # an admin converts it to a private channel
    clock.now += 299
    assert await places.closed("C1") is False, "remembered within the TTL"
    assert len(fake.calls("conversations.info")) == 1
    clock.now += 2
    assert await places.closed("C1") is True, "asked again past it"
    assert len(fake.calls("conversations.info")) == 2


async def test_what_slack_will_not_say_is_closed_and_a_passing_fault_is_asked_again(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    places = SlackPlaces(client, clock=Clock())
    fake.scopes.discard("channels:read")
    assert await places.closed("C1") is True, "missing_scope: closed"
    fake.scopes.add("channels:read")
    assert await places.closed("C1") is True, "a definite refusal is remembered for the TTL"
    assert len(fake.calls("conversations.info")) == 1

    fake.fail("conversations.info", "ratelimited", status=429, retry_after=0)
    fake.fail("conversations.info", "internal_error")
    client.retry_handlers.clear()  # Slack's 429 reaches us, not slack_sdk's retry
    assert await places.closed("C2") is True, "rate limited: closed for now"
    assert await places.closed("C2") is True, "internal_error: closed for now"
    assert await places.closed("C2") is False, "and asked again: open"
    assert len(fake.calls("conversations.info")) == 4


async def test_a_question_gets_the_channel_name_from_the_same_answer(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    from adapters.slack.payloads import from_event

    fake.channel_names["C1"] = "general"
    event = {"type": "app_mention", "channel": "C1", "user": "U1", "text": "<@B> hi", "ts": "1.0"}
    question = from_event(event, event_id="Ev1", team="T1", bot_user_id="B")
    assert question is not None
    placed = await SlackPlaces(client).placed(question)
    assert (placed.channel_name, placed.closed, placed.where.closed) == ("#general", False, False)
    dm = {"type": "message", "channel": "D1", "channel_type": "im", "user": "U1", "text": "hi"}
    direct = from_event({**dm, "ts": "2.0"}, event_id="Ev2", team="T1", bot_user_id="B")
    assert direct is not None and await SlackPlaces(client).placed(direct) == direct
    assert len(fake.calls("conversations.info")) == 1, "a DM is private without asking"


async def test_the_places_remembered_are_bounded(client: AsyncWebClient) -> None:
    places = SlackPlaces(client, clock=Clock())
    for n in range(3):
        await places.closed(f"C{n}")
    places._known.update({f"X{n}": places._known["C0"] for n in range(PLACES_KEPT)})
    await places.closed("C9")
    assert len(places._known) == PLACES_KEPT and "C0" not in places._known


async def test_an_answer_later_than_its_wait_is_closed_and_asked_again(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    places = SlackPlaces(client, clock=Clock())
    assert (await places.described("C1", within=0.0)).closed is True, "no answer in time"
    assert (await places.described("C1")).closed is False, "not remembered: asked again"
