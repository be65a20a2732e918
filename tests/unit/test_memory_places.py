"""Where each surface says a question is asked, as memories read it (``core.memories.Where``):
the space the travel rule compares, the place a channel's memories belong to, and whether
it is a DM or private chat. Pure translations from the surfaces' own records."""

from __future__ import annotations

from adapters.discord.access import Asker as DiscordAsker
from adapters.slack.payloads import Question
from adapters.telegram.asker import Asker as TelegramAsker
from core.memories import Where


def slack(channel: str, *, source: str = "mention") -> Question:
    return Question(source, "T1", channel, "U1", "hi", None, "k")  # type: ignore[arg-type]


def test_slack_the_workspace_is_the_space_and_a_dm_is_private() -> None:
    assert slack("C1").where == Where("slack", "T1", "slack:T1:C1", private=False)
    assert slack("G1").where == Where("slack", "T1", "slack:T1:G1", private=False)
    assert slack("D1", source="dm").where == Where("slack", "T1", "slack:T1:D1", private=True)
    assert slack("D1", source="command").where.private, "/ask typed in a DM"


def test_discord_the_guild_is_the_space_and_a_dm_has_none() -> None:
    assert DiscordAsker(1, guild_id=7).where("discord:42") == Where(
        "discord", "7", "discord:42", private=False
    )
    assert DiscordAsker(1).where("discord:99") == Where("discord", "", "discord:99", private=True)


def test_telegram_a_group_is_the_space_each_topic_a_place_and_a_private_chat_private() -> None:
    assert TelegramAsker(chat=-100, user=5, message=1).where == Where(
        "telegram", "-100", "telegram:-100", private=False
    )
    assert TelegramAsker(chat=-100, user=5, message=1, thread=3).where.place == "telegram:-100:3"
    assert TelegramAsker(chat=5, user=5, message=1).where == Where(
        "telegram", "", "telegram:5", private=True
    )
