"""Raw Slack payloads to Questions: plain dicts in, no I/O."""

from __future__ import annotations

from adapters.slack.payloads import from_command, from_event, plain_text

BOT = "UBOT1"


def test_command_becomes_a_question_claimed_by_trigger_id() -> None:
    q = from_command(
        {
            "team_id": "T1",
            "channel_id": "C1",
            "user_id": "U1",
            "text": "is 3 &lt; 4?",
            "trigger_id": "123.456",
            "response_url": "http://x/r",
        }
    )
    assert (q.source, q.text, q.claim_key, q.thread_ts) == (
        "command",
        "is 3 < 4?",
        "slack:command:123.456",
        None,
    )
    assert q.conversation(root_ts="111.1") == "slack:T1:C1:111.1"


def test_channel_mention_strips_the_bot_and_starts_a_root() -> None:
    event = {
        "type": "app_mention",
        "channel": "C1",
        "user": "U1",
        "text": f"<@{BOT}> hi there",
        "ts": "5.5",
    }
    q = from_event(event, event_id="Ev1", team="T1", bot_user_id=BOT)
    assert q is not None
    assert (q.source, q.text, q.thread_ts, q.claim_key) == (
        "mention",
        "hi there",
        None,
        "slack:event:Ev1",
    )
    assert q.conversation(root_ts="9.9") == "slack:T1:C1:9.9"


def test_mention_in_a_thread_continues_that_thread() -> None:
    event = {
        "type": "app_mention",
        "channel": "C1",
        "user": "U1",
        "text": f"<@{BOT}> and then?",
        "ts": "7.7",
        "thread_ts": "5.5",
    }
    q = from_event(event, event_id="Ev2", team="T1", bot_user_id=BOT)
    assert q is not None and q.thread_ts == "5.5"
    assert q.conversation(root_ts="8.8") == "slack:T1:C1:5.5"
    assert q.conversation(root_ts="8.8", per_thread=False) == "slack:T1:C1"  # redis.per_thread


def test_direct_message_is_one_conversation() -> None:
    event = {
        "type": "message",
        "channel_type": "im",
        "channel": "D1",
        "user": "U1",
        "text": "yo",
        "ts": "1.1",
    }
    q = from_event(event, event_id="Ev3", team="T1", bot_user_id=BOT)
    assert q is not None and q.source == "dm"
    assert q.conversation(root_ts="2.2") == "slack:T1:D1"


def test_ignored_events() -> None:
    base = {
        "type": "message",
        "channel_type": "im",
        "channel": "D1",
        "user": "U1",
        "text": "x",
        "ts": "1",
    }
    for extra in (
        {"bot_id": "B1"},
        {"subtype": "message_changed"},
        {"user": BOT},
        {"text": f"<@{BOT}>"},
        {"channel_type": "channel"},
    ):
        assert from_event({**base, **extra}, event_id="E", team="T", bot_user_id=BOT) is None


def test_plain_text_keeps_references_readable_and_decodes_last() -> None:
    text = "<@U2|ada> in <#C9|general> see <https://a.test/x|a> &lt;!channel&gt; <!here>"
    assert (
        plain_text(text, bot_user_id=BOT) == "@U2 in #general see https://a.test/x <!channel> @here"
    )


def test_files_on_an_event_are_kept_and_a_dm_with_files_is_answered() -> None:
    file = {"id": "F1", "name": "a.pdf", "url_private": "https://files.slack.com/x/a.pdf"}
    event = {
        "type": "message",
        "subtype": "file_share",  # how Slack sends a DM that carries files
        "channel_type": "im",
        "channel": "D1",
        "user": "U1",
        "text": "read this",
        "ts": "1.1",
        "files": [file, "junk", *([file] * 30)],
    }
    q = from_event(event, event_id="Ev4", team="T1", bot_user_id=BOT)
    assert q is not None and q.files[0] == file
    assert len(q.files) == 19  # the first 20 entries, the junk one dropped
    no_files = from_event({**event, "files": "nope"}, event_id="Ev5", team="T1", bot_user_id=BOT)
    assert no_files is not None and no_files.files == ()
