"""Memories through the real bolt app and Web API client against the strict Slack fake
(issue 43's "done when", Slack half): a fact Ada tells in one channel is used in another
channel of the workspace for her and never for Bob; a fact she tells in a DM never reaches a
channel; a fact forgotten is gone from the next run."""

from __future__ import annotations

import json
from typing import Any

from adapters import words
from core.memories import Holder, InMemoryMemories, Memories
from tests.fakes.slack_server import TEAM_ID
from tests.integration.test_slack_app import ASKER, CHANNEL, Harness, fake, make  # noqa: F401
from tests.memories import TRAVELLING, recalled

OTHER_CHANNEL = "C2RANDOM"
BOB = "U2BOB"


async def dm(h: Harness, text: str, *, ts: str) -> None:
    event = {"type": "message", "channel": "D1ADA", "channel_type": "im", "user": ASKER}
    await h.event({**event, "ts": ts, "text": text}, event_id=f"Ev{ts}")
    await h.settled()


async def ask(h: Harness, text: str, *, user: str = ASKER, channel: str = CHANNEL) -> None:
    status, _, _ = await h.ask(text, user=user, channel=channel)
    assert status == 200
    await h.settled()


async def test_a_fact_travels_between_channels_for_its_teller_only_and_dms_stay_private(
    make: Any,  # noqa: F811
) -> None:
    h: Harness = await make(
        [
            *TRAVELLING,
            "Thought: gone\nAction: forget[payments]",
            "Thought: done\nAction: finish[Forgotten.]",
            "Thought: ok\nAction: finish[ok]",
        ],
        streaming="update",
    )
    memories = Memories(InMemoryMemories())
    h.bot.agent.memories = memories  # memory.enabled, as App.create wires it
    model = h.model

    await ask(h, "Remember that I manage the payments team")
    kept = await memories.store.list(Holder.person("slack", ASKER))
    assert [(m.text, m.where.place, m.where.private) for m in kept] == [
        ("I manage the payments team", f"slack:{TEAM_ID}:{CHANNEL}", False)
    ]
    await ask(h, "Which team do I manage?", channel=OTHER_CHANNEL)
    assert "I manage the payments team" in recalled(model, 2), "Ada's, in another channel"
    await ask(h, "Which team do I manage?", user=BOB, channel=OTHER_CHANNEL)
    assert recalled(model, 3) == "", "never for Bob"

    await dm(h, "remember my salary is 100k", ts="7.1")
    assert "payments" not in recalled(model, 4), "a channel's fact is not recalled in a DM"
    await dm(h, "what do you know?", ts="7.2")
    assert "my salary is 100k" in recalled(model, 6), "a DM's fact, in her DM"
    await ask(h, "what do you know about me?", channel=OTHER_CHANNEL)
    assert "salary" not in recalled(model, 7) and "payments" in recalled(model, 7)

    await ask(h, "forget that I manage payments")
    await ask(h, "what do you know about me?", channel=OTHER_CHANNEL)
    assert "payments" not in recalled(model, 10), "a deletion holds on the next run"
    model.assert_complete()


HOSTILE = "@everyone <!channel> [x](https://evil)"


async def memory_command(h: Harness, text: str, *, user: str = ASKER) -> dict[str, Any]:
    """``/ask-settings memory ...`` through bolt: the ephemeral ack's body."""
    status, body, _ = await h.ask(f"memory {text}", user=user, command="/ask-settings")
    assert status == 200
    reply: dict[str, Any] = json.loads(body)
    assert reply["response_type"] == "ephemeral", "only the person sees their memories"
    return reply


async def test_the_memory_command_lists_and_forgets_and_the_next_run_no_longer_recalls(
    make: Any,  # noqa: F811
) -> None:
    h: Harness = await make(
        [
            'Thought: keep it\nAction: remember[{"fact": "I manage the payments team"}]',
            "Thought: kept\nAction: finish[Noted.]",
            f'Thought: keep it\nAction: remember[{{"fact": "{HOSTILE}"}}]',
            "Thought: kept\nAction: finish[Noted.]",
            "Thought: ok\nAction: finish[ok]",
        ],
        streaming="update",
    )
    memories = Memories(InMemoryMemories())
    h.bot.agent.memories = memories
    await ask(h, "Remember that I manage the payments team")
    await ask(h, "Remember this")
    (payments, hostile) = sorted(
        await memories.store.list(Holder.person("slack", ASKER)), key=lambda m: m.text[0] == "@"
    )
    assert hostile.text == HOSTILE
    listed = (await memory_command(h, ""))["text"]
    assert f"{payments.id} · I manage the payments team · yours ·" in listed
    assert hostile.id in listed and "evil" in listed, "the hostile memory is listed"
    assert "<!channel>" not in listed and "@everyone" not in listed, "listed inert"
    assert "<https://" not in listed, "no link formed"

    refused = (await memory_command(h, f"forget {payments.id}", user=BOB))["text"]
    assert refused == words.memory_not_found(f"“{payments.id}”"), "Bob cannot forget Ada's"
    assert payments in await memories.store.list(Holder.person("slack", ASKER))
    gone = (await memory_command(h, f"forget {payments.id}"))["text"]
    assert gone == words.memory_forgotten(payments.id)
    await ask(h, "Which team do I manage?", channel=OTHER_CHANNEL)
    assert "payments" not in recalled(h.model, 4), "the next run no longer recalls it"
    assert hostile.id in recalled(h.model, 4)
    h.model.assert_complete()


async def test_the_memory_command_says_memory_is_off(make: Any) -> None:  # noqa: F811
    h: Harness = await make([])
    h.bot.agent.memories = None
    assert (await memory_command(h, "list"))["text"] == words.MEMORY_OFF
    assert (await memory_command(h, "forget"))["text"] == words.MEMORY_USAGE


SECRET_CHANNEL = "C3SECRET"


async def test_a_fact_told_in_a_private_channel_stays_there(make: Any) -> None:  # noqa: F811
    """The travel rule on Slack's private channels: ``conversations.info`` says the channel is
    private, so Ada's fact told there is recalled there only (never in the workspace's
    public channels, never listed there), while her public channels' facts reach it."""
    h: Harness = await make(
        [
            'Thought: keep it\nAction: remember[{"fact": "I am interviewing elsewhere"}]',
            "Thought: kept\nAction: finish[Noted.]",
            'Thought: keep it\nAction: remember[{"fact": "I manage the payments team"}]',
            "Thought: kept\nAction: finish[Noted.]",
            "Thought: ok\nAction: finish[ok]",
            "Thought: ok\nAction: finish[ok]",
        ],
        streaming="update",
    )
    h.fake.private_channels.add(SECRET_CHANNEL)
    memories = Memories(InMemoryMemories())
    h.bot.agent.memories = memories
    await ask(h, "Remember that I am interviewing elsewhere", channel=SECRET_CHANNEL)
    (secret,) = await memories.store.list(Holder.person("slack", ASKER))
    assert (secret.where.private, secret.where.closed) == (False, True)
    await ask(h, "Remember that I manage the payments team", channel=OTHER_CHANNEL)
    await ask(h, "what do you know about me?", channel=CHANNEL)
    assert "payments" in recalled(h.model, 4), "a public fact, in another public channel"
    assert "interviewing" not in recalled(h.model, 4), "the private channel's stays there"
    await ask(h, "what do you know about me?", channel=SECRET_CHANNEL)
    assert "interviewing" in recalled(h.model, 5) and "payments" in recalled(h.model, 5)

    status, body, _ = await h.ask("memory", command="/ask-settings", channel=CHANNEL)
    assert status == 200 and secret.id not in json.loads(body)["text"], "not listed in public"
    status, body, _ = await h.ask("memory", command="/ask-settings", channel=SECRET_CHANNEL)
    assert status == 200 and secret.id in json.loads(body)["text"], "listed where it was told"
    h.model.assert_complete()


def everything_posted(h: Harness, channel: str) -> str:
    """Every message the bot posted in ``channel`` and its threads, every version of it."""
    return "\n".join(
        json.dumps([m.text, m.blocks, m.versions])
        for m in h.fake.messages.values()
        if m.channel == channel
    )


async def test_a_channels_trace_thread_names_a_fact_told_elsewhere_by_id_only(
    make: Any,  # noqa: F811
) -> None:
    """Ada's fact told in one channel is recalled for her in another, where everyone reads
    the trace thread: it lists the memory by id there, never its text; where it was told,
    and in her DM for her DM's facts, the text is shown."""
    h: Harness = await make(
        [
            'Thought: keep it\nAction: remember[{"fact": "I am interviewing at Acme"}]',
            "Thought: kept\nAction: finish[Noted.]",
            "Thought: ok\nAction: finish[ok]",
            "Thought: ok\nAction: finish[ok]",
        ],
        streaming="update",
    )
    memories = Memories(InMemoryMemories())
    h.bot.agent.memories = memories
    await ask(h, "Remember that I am interviewing at Acme")
    (fact,) = await memories.store.list(Holder.person("slack", ASKER))
    await ask(h, "what do you know about me?", channel=OTHER_CHANNEL)
    assert "interviewing at Acme" in recalled(h.model, 2), "the model reads it whole"
    posted = everything_posted(h, OTHER_CHANNEL)
    assert "recall_memories" in posted and fact.id in posted, "the thread says it was given"
    assert "Acme" not in posted, "but not what it says: the channel reads the thread"
    before = everything_posted(h, CHANNEL).count("interviewing at Acme")
    await ask(h, "what do you know about me?", channel=CHANNEL)
    after = everything_posted(h, CHANNEL).count("interviewing at Acme")
    assert after > before, "where it was told, its recall shows its text"
    h.model.assert_complete()


SHARED_CHANNEL = "C4PARTNERS"


async def test_a_channel_shared_with_another_organisation_is_a_place_apart(
    make: Any,  # noqa: F811
) -> None:
    """Slack Connect: people of another organisation read a shared channel, so Ada's facts
    told in her workspace's channels are not recalled there, and one told there stays
    there."""
    h: Harness = await make(
        [
            'Thought: keep it\nAction: remember[{"fact": "I manage the payments team"}]',
            "Thought: kept\nAction: finish[Noted.]",
            'Thought: keep it\nAction: remember[{"fact": "our contract renews in May"}]',
            "Thought: kept\nAction: finish[Noted.]",
            "Thought: ok\nAction: finish[ok]",
            "Thought: ok\nAction: finish[ok]",
        ],
        streaming="update",
    )
    h.fake.shared_channels.add(SHARED_CHANNEL)
    memories = Memories(InMemoryMemories())
    h.bot.agent.memories = memories
    await ask(h, "Remember that I manage the payments team")
    await ask(h, "Remember that our contract renews in May", channel=SHARED_CHANNEL)
    await ask(h, "what do you know about me?", channel=SHARED_CHANNEL)
    assert "contract" in recalled(h.model, 4), "told there, recalled there"
    assert "payments" not in recalled(h.model, 4), "the workspace's facts stay in it"
    await ask(h, "what do you know about me?", channel=OTHER_CHANNEL)
    assert "payments" in recalled(h.model, 5) and "contract" not in recalled(h.model, 5)
    status, body, _ = await h.ask("memory", command="/ask-settings", channel=SHARED_CHANNEL)
    listed = json.loads(body)["text"]
    assert status == 200 and "contract" in listed and "payments" not in listed
    h.model.assert_complete()
