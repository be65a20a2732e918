"""The fake Slack refuses what Slack refuses, the way Slack refuses it, through the real
``AsyncWebClient`` over HTTP. A fake that accepted everything proved nothing about the
renderer; these tests pin each limit (and its boundary, so the fake does not over-refuse)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack_server import TOKEN, FakeSlack, validate_message

CHANNEL = "C1"
METHODS = ("chat.postMessage", "chat.update", "chat.postEphemeral")


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


@pytest.fixture
async def client(fake: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    async with aiohttp.ClientSession() as session:
        yield AsyncWebClient(token=TOKEN, base_url=fake.base_url, session=session)


def section(text: str, kind: str = "mrkdwn", **extra: Any) -> dict[str, Any]:
    return {"type": "section", "text": {"type": kind, "text": text, **extra}}


def button(**fields: Any) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": "b",
        "text": {"type": "plain_text", "text": "Stop"},
        **fields,
    }


async def send(
    client: AsyncWebClient, method: str, *, text: str | None = "fallback", blocks: Any = None
) -> dict[str, Any]:
    """``method`` with these contents, the way slack_sdk sends it; returns the answer's data."""
    if method == "chat.update":
        posted = await client.chat_postMessage(channel=CHANNEL, text="placeholder")
        response = await client.chat_update(
            channel=CHANNEL, ts=posted["ts"], text=text, blocks=blocks
        )
    elif method == "chat.postEphemeral":
        response = await client.chat_postEphemeral(
            channel=CHANNEL, user="U1", text=text, blocks=blocks
        )
    else:
        response = await client.chat_postMessage(channel=CHANNEL, text=text, blocks=blocks)
    assert isinstance(response.data, dict)
    return response.data


async def refused(client: AsyncWebClient, method: str, **contents: Any) -> dict[str, Any]:
    with pytest.raises(SlackApiError) as caught:
        await send(client, method, **contents)
    assert caught.value.response.status_code == 200, "Slack refuses contents with HTTP 200"
    data = caught.value.response.data
    assert isinstance(data, dict) and data["ok"] is False
    if data.get("errors"):
        messages = data["response_metadata"]["messages"]
        assert messages == [f"[ERROR] {e}" for e in data["errors"]]
    return data


BLOCK_CASES: list[tuple[str, Any, str]] = [
    ("51 blocks", [section("x")] * 51, "no more than 50 items allowed [json-pointer:/blocks]"),
    (
        "section text over 3000",
        [section("x" * 3001)],
        "must be less than 3001 characters [json-pointer:/blocks/0/text/text]",
    ),
    (
        "empty section text",
        [section("ok"), section("")],
        "must be more than 0 characters [json-pointer:/blocks/1/text/text]",
    ),
    (
        "section without text or fields",
        [{"type": "section"}],
        "missing required field: text [json-pointer:/blocks/0]",
    ),
    (
        "11 fields",
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}],
        "no more than 10 items allowed [json-pointer:/blocks/0/fields]",
    ),
    (
        "a field over 2000",
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]}],
        "must be less than 2001 characters [json-pointer:/blocks/0/fields/0/text]",
    ),
    (
        "header over 150",
        [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
        "must be less than 151 characters [json-pointer:/blocks/0/text/text]",
    ),
    (
        "mrkdwn header",
        [{"type": "header", "text": {"type": "mrkdwn", "text": "*h*"}}],
        "must be a valid enum value [json-pointer:/blocks/0/text/type]",
    ),
    (
        "11 context elements",
        [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}],
        "no more than 10 items allowed [json-pointer:/blocks/0/elements]",
    ),
    (
        "context text over 3000",
        [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c" * 3001}]}],
        "must be less than 3001 characters [json-pointer:/blocks/0/elements/0/text]",
    ),
    (
        "button text over 75",
        [section("s") | {"accessory": button(text={"type": "plain_text", "text": "b" * 76})}],
        "must be less than 76 characters [json-pointer:/blocks/0/accessory/text/text]",
    ),
    (
        "button value over 2000",
        [{"type": "actions", "elements": [button(value="v" * 2001)]}],
        "must be less than 2001 characters [json-pointer:/blocks/0/elements/0/value]",
    ),
    (
        "action_id over 255",
        [{"type": "actions", "elements": [button(action_id="a" * 256)]}],
        "must be less than 256 characters [json-pointer:/blocks/0/elements/0/action_id]",
    ),
    (
        "block_id over 255",
        [section("s") | {"block_id": "b" * 256}],
        "must be less than 256 characters [json-pointer:/blocks/0/block_id]",
    ),
    (
        "26 actions",
        [{"type": "actions", "elements": [button(action_id=f"a{i}") for i in range(26)]}],
        "no more than 25 items allowed [json-pointer:/blocks/0/elements]",
    ),
    (
        "a repeated action_id",
        [{"type": "actions", "elements": [button(), button()]}],
        '`action_id` "b" already exists [json-pointer:/blocks/0/elements/1/action_id]',
    ),
    (
        "emoji on mrkdwn",
        [section("s", emoji=True)],
        "invalid additional property: emoji [json-pointer:/blocks/0/text]",
    ),
    (
        "a bare string for a text object",
        [{"type": "section", "text": "plain string"}],
        "must provide an object [json-pointer:/blocks/0/text]",
    ),
    (
        "an unknown text type",
        [section("s", kind="markdown")],
        "must be a valid enum value [json-pointer:/blocks/0/text/type]",
    ),
    (
        "an unknown block type",
        [{"type": "sektion", "text": {"type": "mrkdwn", "text": "s"}}],
        "failed to match all allowed schemas [json-pointer:/blocks/0]",
    ),
]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    ("case", "blocks", "expected"), BLOCK_CASES, ids=[c[0] for c in BLOCK_CASES]
)
async def test_invalid_blocks_are_refused_with_slacks_pointer(
    client: AsyncWebClient, fake: FakeSlack, method: str, case: str, blocks: Any, expected: str
) -> None:
    data = await refused(client, method, blocks=blocks)
    assert data["error"] == "invalid_blocks", case
    assert expected in data["errors"], data["errors"]
    call = fake.calls(method, ok=False)[-1]
    assert call.error == "invalid_blocks" and expected in call.errors


async def test_a_text_object_too_long_names_both_the_schema_and_the_length(
    client: AsyncWebClient,
) -> None:
    data = await refused(client, "chat.postMessage", blocks=[section("x" * 3001)])
    assert data["errors"] == [
        "failed to match all allowed schemas [json-pointer:/blocks/0/text]",
        "must be less than 3001 characters [json-pointer:/blocks/0/text/text]",
    ]


@pytest.mark.parametrize("method", METHODS)
async def test_the_limits_themselves_are_accepted(
    client: AsyncWebClient, fake: FakeSlack, method: str
) -> None:
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "h" * 150}},
        section("x" * 3000) | {"block_id": "b" * 255},
        {"type": "section", "fields": [{"type": "plain_text", "text": "f" * 200}] * 10},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 10},
        {
            "type": "actions",
            "elements": [
                button(
                    action_id="a" * 255,
                    value="v" * 2000,
                    text={"type": "plain_text", "text": "t" * 75, "emoji": True},
                ),
                *(button(action_id=f"a{i}") for i in range(24)),
            ],
        },
        *[{"type": "divider"}] * 45,
    ]
    assert len(blocks) == 50
    await send(client, method, text="t" * 4000, blocks=blocks)
    assert fake.calls(method, ok=False) == []


@pytest.mark.parametrize("method", METHODS)
async def test_block_text_over_12000_is_msg_blocks_too_long(
    client: AsyncWebClient, method: str
) -> None:
    at_limit = [section("x" * 3000)] * 4
    await send(client, method, blocks=at_limit)
    data = await refused(client, method, blocks=[*at_limit, section("x")])
    assert data["error"] == "msg_blocks_too_long"


@pytest.mark.parametrize("method", METHODS)
async def test_top_level_text_over_4000_is_msg_too_long(
    client: AsyncWebClient, method: str
) -> None:
    data = await refused(client, method, text="t" * 4001)
    assert data["error"] == "msg_too_long"


@pytest.mark.parametrize("method", METHODS)
async def test_nothing_to_post_is_no_text(client: AsyncWebClient, method: str) -> None:
    with pytest.warns(UserWarning, match="top-level `text` argument is missing"):  # slack_sdk
        assert (await refused(client, method, text="", blocks=[]))["error"] == "no_text"


async def test_blocks_that_are_not_json_are_invalid_blocks_format(
    client: AsyncWebClient,
) -> None:
    with pytest.raises(SlackApiError) as caught:
        await client.api_call(
            "chat.postMessage", data={"channel": CHANNEL, "text": "t", "blocks": "[{not json"}
        )
    assert caught.value.response["error"] == "invalid_blocks_format"


async def test_update_without_blocks_keeps_them_and_an_empty_list_removes_them(
    client: AsyncWebClient, fake: FakeSlack
) -> None:
    posted = await client.chat_postMessage(channel=CHANNEL, text="t", blocks=[section("s")])
    await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="t2")
    assert fake.messages[posted["ts"]].blocks == [section("s")]
    await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="t3", blocks=[])
    assert fake.messages[posted["ts"]].blocks == []


# ---- the token ------------------------------------------------------------------------------


async def test_a_wrong_token_is_invalid_auth_and_none_is_not_authed(fake: FakeSlack) -> None:
    async with aiohttp.ClientSession() as session:
        wrong = AsyncWebClient(token="xoxb-wrong", base_url=fake.base_url, session=session)
        with pytest.raises(SlackApiError) as caught:
            await wrong.chat_postMessage(channel=CHANNEL, text="hi")
        assert caught.value.response["error"] == "invalid_auth"
        with pytest.raises(SlackApiError) as caught:
            await wrong.auth_test()
        assert caught.value.response["error"] == "invalid_auth"
        anonymous = AsyncWebClient(base_url=fake.base_url, session=session)
        with pytest.raises(SlackApiError) as caught:
            await anonymous.auth_test()
        assert caught.value.response["error"] == "not_authed"
        # Slack also takes the token as an argument ("or alternatively, as a POST parameter").
        assert (await anonymous.api_call("auth.test", data={"token": TOKEN}))["ok"]
    assert fake.messages == {}


async def test_the_fake_can_be_given_another_token(fake: FakeSlack) -> None:
    async with FakeSlack(token="xoxb-other") as other, aiohttp.ClientSession() as session:
        client = AsyncWebClient(token="xoxb-other", base_url=other.base_url, session=session)
        assert (await client.auth_test())["ok"]
        default = AsyncWebClient(token=TOKEN, base_url=other.base_url, session=session)
        with pytest.raises(SlackApiError):
            await default.auth_test()


# ---- files_upload_v2 ----------------------------------------------------------------------


async def test_files_upload_v2_goes_through_all_three_steps(
    client: AsyncWebClient, fake: FakeSlack
) -> None:
    content = '{"question": "Größe?"}'  # non-ASCII: the declared length is in bytes
    response = await client.files_upload_v2(
        channel=CHANNEL, content=content, filename="trace.json", title="Trace"
    )
    assert response["files"][0]["title"] == "Trace"
    assert list(fake.uploads.values()) == [content.encode()]
    assert [c.method for c in fake.records] == [
        "files.getUploadURLExternal",
        "upload",
        "files.completeUploadExternal",
    ]


async def test_an_upload_url_needs_a_filename_and_a_length(client: AsyncWebClient) -> None:
    for kwargs in ({"filename": "a.json", "length": 0}, {"filename": "", "length": 10}):
        with pytest.raises(SlackApiError) as caught:
            await client.files_getUploadURLExternal(**kwargs)  # type: ignore[arg-type]
        assert caught.value.response["error"] == "missing_argument"


async def test_an_upload_of_the_wrong_length_fails_and_cannot_be_completed(
    client: AsyncWebClient, fake: FakeSlack
) -> None:
    ticket = await client.files_getUploadURLExternal(filename="a.json", length=10)
    async with aiohttp.ClientSession() as session:
        async with session.post(ticket["upload_url"], data=b"12345") as response:
            assert response.status != 200  # "a non-200 response indicates a failure"
        async with session.post(f"{fake.url}/upload/FNOSUCH", data=b"1") as response:
            assert response.status == 404
    with pytest.raises(SlackApiError) as caught:
        await client.files_completeUploadExternal(files=[{"id": ticket["file_id"]}])
    assert caught.value.response["error"] == "file_not_found"
    assert fake.uploads == {}


async def test_completing_before_uploading_is_file_not_found(client: AsyncWebClient) -> None:
    ticket = await client.files_getUploadURLExternal(filename="a.json", length=3)
    with pytest.raises(SlackApiError) as caught:
        await client.files_completeUploadExternal(files=[{"id": ticket["file_id"]}])
    assert caught.value.response["error"] == "file_not_found"


async def test_slack_sdk_reports_a_refused_upload(
    client: AsyncWebClient, fake: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client declares one length and the bytes say another: the upload URL refuses it,
    # which slack_sdk turns into SlackRequestError before it ever completes the upload.
    real = fake._m_files_getUploadURLExternal

    def declare_more(args: dict[str, Any]) -> dict[str, Any]:
        return real({**args, "length": int(args["length"]) + 1})

    monkeypatch.setattr(fake, "_m_files_getUploadURLExternal", declare_more)
    with pytest.raises(SlackRequestError):
        await client.files_upload_v2(channel=CHANNEL, content="abc", filename="a.json")
    assert not fake.calls("files.completeUploadExternal")


# ---- the validator on its own ---------------------------------------------------------------


def test_validate_message_takes_blocks_as_a_json_string_too() -> None:
    assert validate_message({"text": "t", "blocks": json.dumps([section("s")])}) is None
    error = validate_message({"blocks": json.dumps([section("")])})
    assert error is not None and error[0] == "invalid_blocks"


# ---- views.open -------------------------------------------------------------------------------


def modal(**fields: Any) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": "cb",
        "title": {"type": "plain_text", "text": "Edit the input"},
        "submit": {"type": "plain_text", "text": "Run it"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": "meta",
        "blocks": [
            section("What runs"),
            {
                "type": "input",
                "block_id": "in",
                "label": {"type": "plain_text", "text": "Input"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "value",
                    "multiline": True,
                    "initial_value": "x",
                    "max_length": 3000,
                },
            },
        ],
        **fields,
    }


async def refused_view(client: AsyncWebClient, fake: FakeSlack, view: Any) -> list[str]:
    with pytest.raises(SlackApiError) as caught:
        await client.views_open(trigger_id=fake.trigger(), view=view)
    data = caught.value.response.data
    assert isinstance(data, dict) and data["error"] == "invalid_arguments"
    assert "errors" not in data, "views.open sends its pointers as messages only"
    messages: list[str] = data["response_metadata"]["messages"]
    assert messages[0] == "[ERROR] failed to match all allowed schemas [json-pointer:/view]"
    return [m.removeprefix("[ERROR] ") for m in messages]


def text_input(**fields: Any) -> dict[str, Any]:
    return {"type": "plain_text_input", "action_id": "value", **fields}


def input_block(**fields: Any) -> dict[str, Any]:
    return {
        "type": "input",
        "block_id": "in",
        "label": {"type": "plain_text", "text": "Input"},
        "element": text_input(),
        **fields,
    }


VIEW_CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "title over 24",
        {"title": {"type": "plain_text", "text": "t" * 25}},
        "must be less than 25 characters [json-pointer:/view/title/text]",
    ),
    (
        "mrkdwn title",
        {"title": {"type": "mrkdwn", "text": "t"}},
        "must be a valid enum value [json-pointer:/view/title/type]",
    ),
    (
        "submit over 24",
        {"submit": {"type": "plain_text", "text": "s" * 25}},
        "must be less than 25 characters [json-pointer:/view/submit/text]",
    ),
    (
        "close over 24",
        {"close": {"type": "plain_text", "text": "c" * 25}},
        "must be less than 25 characters [json-pointer:/view/close/text]",
    ),
    (
        "101 blocks",
        {"blocks": [section("x")] * 101},
        "no more than 100 items allowed [json-pointer:/view/blocks]",
    ),
    ("no blocks", {"blocks": []}, "must contain at least 1 items [json-pointer:/view/blocks]"),
    (
        "private_metadata over 3000",
        {"private_metadata": "m" * 3001},
        "must be less than 3001 characters [json-pointer:/view/private_metadata]",
    ),
    (
        "callback_id over 255",
        {"callback_id": "c" * 256},
        "must be less than 256 characters [json-pointer:/view/callback_id]",
    ),
    (
        "an input without submit",
        {"submit": None},
        "missing required field: submit [json-pointer:/view]",
    ),
    (
        "label over 2000",
        {"blocks": [input_block(label={"type": "plain_text", "text": "l" * 2001})]},
        "must be less than 2001 characters [json-pointer:/view/blocks/0/label/text]",
    ),
    (
        "no label",
        {"blocks": [{"type": "input", "element": text_input()}]},
        "missing required field: label [json-pointer:/view/blocks/0]",
    ),
    (
        "hint over 2000",
        {"blocks": [input_block(hint={"type": "plain_text", "text": "h" * 2001})]},
        "must be less than 2001 characters [json-pointer:/view/blocks/0/hint/text]",
    ),
    (
        "max_length over 3000",
        {"blocks": [input_block(element=text_input(max_length=3001))]},
        "must be between 1 and 3000 [json-pointer:/view/blocks/0/element/max_length]",
    ),
    (
        "max_length 0",
        {"blocks": [input_block(element=text_input(max_length=0))]},
        "must be between 1 and 3000 [json-pointer:/view/blocks/0/element/max_length]",
    ),
    (
        "min_length over 3000",
        {"blocks": [input_block(element=text_input(min_length=3001))]},
        "must be between 0 and 3000 [json-pointer:/view/blocks/0/element/min_length]",
    ),
    (
        "placeholder over 150",
        {
            "blocks": [
                input_block(
                    element=text_input(placeholder={"type": "plain_text", "text": "p" * 151})
                )
            ]
        },
        "must be less than 151 characters [json-pointer:/view/blocks/0/element/placeholder/text]",
    ),
    (
        "input action_id over 255",
        {"blocks": [input_block(element=text_input(action_id="a" * 256))]},
        "must be less than 256 characters [json-pointer:/view/blocks/0/element/action_id]",
    ),
    (
        "an unknown view field",
        {"colour": "red"},
        "invalid additional property: colour [json-pointer:/view]",
    ),
]


@pytest.mark.parametrize(("case", "fields", "expected"), VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
async def test_views_open_refuses_what_slack_refuses(
    client: AsyncWebClient, fake: FakeSlack, case: str, fields: dict[str, Any], expected: str
) -> None:
    view = {k: v for k, v in modal(**fields).items() if v is not None}
    assert expected in await refused_view(client, fake, view), case
    assert fake.views == []


async def test_views_open_takes_the_limits_themselves_and_records_the_view(
    client: AsyncWebClient, fake: FakeSlack
) -> None:
    long_input = input_block(
        label={"type": "plain_text", "text": "l" * 2000},
        hint={"type": "plain_text", "text": "h" * 2000},
        optional=True,
        element=text_input(
            action_id="a" * 255,
            multiline=True,
            min_length=3000,
            max_length=3000,
            initial_value="v" * 10_000,  # no documented limit, and none in the fake
            placeholder={"type": "plain_text", "text": "p" * 150},
        ),
    )
    view = modal(
        title={"type": "plain_text", "text": "t" * 24},
        submit={"type": "plain_text", "text": "s" * 24},
        close={"type": "plain_text", "text": "c" * 24},
        private_metadata="m" * 3000,
        callback_id="c" * 255,
        blocks=[long_input, *[section("x")] * 99],
    )
    response = await client.views_open(trigger_id=fake.trigger(), view=view)
    assert response["view"]["id"].startswith("V") and response["view"]["private_metadata"] == (
        "m" * 3000
    )
    assert fake.views == [response["view"]]


async def test_a_trigger_is_needed_used_once_and_only_while_fresh(
    client: AsyncWebClient, fake: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SlackApiError) as caught:
        await client.views_open(view=modal())
    assert caught.value.response["error"] == "invalid_arguments"
    assert caught.value.response["response_metadata"]["messages"] == [
        "[ERROR] invalid `trigger_id`"
    ]
    with pytest.raises(SlackApiError) as caught:
        await client.views_open(trigger_id="12345.98765.abcd2358fdea", view=modal())
    assert caught.value.response["error"] == "invalid_trigger_id"
    trigger = fake.trigger()
    await client.views_open(trigger_id=trigger, view=modal())
    with pytest.raises(SlackApiError) as caught:
        await client.views_open(trigger_id=trigger, view=modal())
    assert caught.value.response["error"] == "exchanged_trigger_id"
    stale = fake.trigger()
    fake._triggers[stale] -= 3.5
    with pytest.raises(SlackApiError) as caught:
        await client.views_open(trigger_id=stale, view=modal())
    assert caught.value.response["error"] == "expired_trigger_id"
    assert len(fake.views) == 1


async def test_a_view_over_250_kb_is_view_too_large(
    client: AsyncWebClient, fake: FakeSlack
) -> None:
    big = input_block(element=text_input(initial_value="v" * 260_000))
    with pytest.raises(SlackApiError) as caught:
        await client.views_open(trigger_id=fake.trigger(), view=modal(blocks=[big]))
    assert caught.value.response["error"] == "view_too_large"


async def test_input_blocks_are_for_views_not_messages(client: AsyncWebClient) -> None:
    data = await refused(client, "chat.postMessage", blocks=[input_block()])
    assert "failed to match all allowed schemas [json-pointer:/blocks/0]" in data["errors"]


async def test_a_submission_carries_the_view_and_its_values(
    client: AsyncWebClient, fake: FakeSlack
) -> None:
    await client.views_open(trigger_id=fake.trigger(), view=modal())
    payload = fake.submission(fake.views[0], {"in": "edited"}, user="U1ADA")
    assert payload["type"] == "view_submission" and payload["user"]["id"] == "U1ADA"
    assert payload["view"]["private_metadata"] == "meta"
    assert payload["view"]["state"]["values"] == {
        "in": {"value": {"type": "plain_text_input", "value": "edited"}}
    }
    empty = fake.submission(fake.views[0], {}, user="U1ADA")
    assert empty["view"]["state"]["values"]["in"]["value"]["value"] is None


async def info(client: AsyncWebClient, **args: Any) -> dict[str, Any]:
    """``conversations.info`` as slack_sdk sends it; Slack's answer, or its error body."""
    try:  # slack_sdk's own method insists on ``channel``: the raw call sends none at all
        answer = await client.api_call("conversations.info", http_verb="GET", params=args)
        return dict(answer.data)  # type: ignore[arg-type]
    except SlackApiError as exc:
        return dict(exc.response.data)  # type: ignore[arg-type]


async def test_conversations_info_describes_each_kind_and_refuses_as_slack_does(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    """``channel`` is required and must be a conversation the token may see; the scope
    needed depends on the kind (channels:read, groups:read, mpim:read, im:read), answered
    ``missing_scope`` with ``needed`` and ``provided``; a private channel or group DM the
    bot is not in is ``channel_not_found`` (Slack hides it), a public one says
    ``is_member: false``."""
    fake.private_channels.add("C0SECRET")
    fake.group_dms.add("C0GROUP")
    fake.channel_names["C1"] = "general"
    public = dict((await client.conversations_info(channel="C1")).data)  # type: ignore[arg-type]
    assert public["ok"] is True
    assert {k: public["channel"][k] for k in ("name", "is_private", "is_mpim", "is_im")} == {
        "name": "general",
        "is_private": False,
        "is_mpim": False,
        "is_im": False,
    }
    assert (await info(client, channel="C0SECRET"))["channel"]["is_private"] is True
    fake.shared_channels.add("C0CONNECT")
    connect = (await info(client, channel="C0CONNECT"))["channel"]
    assert (connect["is_shared"], connect["is_ext_shared"], connect["is_private"]) == (
        True,
        True,
        False,
    )
    assert (await info(client, channel="G0LEGACY"))["channel"]["is_private"] is True
    assert await info(client, channel="C0GROUP") == {
        "ok": False,
        "error": "missing_scope",
        "needed": "mpim:read",
        "provided": ",".join(sorted(fake.scopes)),
    }
    fake.scopes.add("mpim:read")
    group = (await info(client, channel="C0GROUP"))["channel"]
    assert (group["is_mpim"], group["is_private"]) == (True, True)
    for refused in ({}, {"channel": ""}, {"channel": "general"}, {"channel": "#C1"}):
        assert (await info(client, **refused))["error"] == "channel_not_found", refused
    fake.not_joined.update({"C0SECRET", "C1"})
    assert (await info(client, channel="C0SECRET"))["error"] == "channel_not_found"
    assert (await info(client, channel="C1"))["channel"]["is_member"] is False
    fake.scopes.discard("groups:read")
    fake.not_joined.clear()
    answer = await info(client, channel="C0SECRET")
    assert (answer["error"], answer["needed"]) == ("missing_scope", "groups:read")
    assert (await info(client, channel="C1"))["ok"] is True, "a public one needs channels:read"
