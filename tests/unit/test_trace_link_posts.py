"""The trace page's link in the thread's last post, for any run: the posts stay within what
Discord and Slack accept (checked by the fakes' own rules), and the link is the last thing."""

from __future__ import annotations

import pytest
from hypothesis import given

from adapters.discord.render import DiscordRenderer
from adapters.slack.render import SlackRenderer
from tests.fakes.discord_limits import message_refusal
from tests.fakes.slack_server import validate_message
from tests.hostile import DrawnRun, runs
from tests.properties import property_settings

# Renderers outside core, on drawn runs: the coverage gate is on core, and tracing
# every call of rich and Hypothesis made these six times slower.
pytestmark = pytest.mark.no_cover

LINK = "https://bot.example.com/t/0123456789ab?exp=1800000000&sig=" + "f" * 64


def link_for(trace_id: str) -> str:
    return LINK


@property_settings(60)
@given(runs(max_steps=12, finished=True))
def test_discord_threads_end_with_the_link_and_stay_valid(run: DrawnRun) -> None:
    plain = DiscordRenderer().trace_posts(run.trace)
    posts = DiscordRenderer(trace_link=link_for).trace_posts(run.trace)
    assert len(posts) in (len(plain), len(plain) + 1)
    assert posts[-1].content.endswith(f"-# 📄 Full trace page: <{LINK}>")
    assert sum("Full trace page" in p.content for p in posts) == 1
    before = posts[-1].content.rsplit("Full trace page", 1)[0]
    assert before.count("```") % 2 == 0  # not inside a code block: a link people can open
    for post in posts:
        assert message_refusal({"content": post.content}, len(post.files)) is None
    assert posts[: len(plain) - 1] == plain[: len(plain) - 1]


@property_settings(60)
@given(runs(max_steps=12, finished=True))
def test_slack_threads_end_with_the_link_and_stay_valid(run: DrawnRun) -> None:
    plain = SlackRenderer().trace_posts(run.trace)
    posts = SlackRenderer(trace_link=link_for).trace_posts(run.trace)
    assert len(posts) in (len(plain), len(plain) + 1)
    last = posts[-1].blocks[-1]
    assert last == {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": f":page_facing_up: Full trace page: <{LINK}>"}],
    }
    for post in posts:
        assert validate_message({"channel": "C1", **post.kwargs()}) is None


def test_no_link_when_the_thread_has_no_steps() -> None:
    from core.trace import Trace

    trace = Trace(question="q", answer="a", status="answered")
    assert DiscordRenderer(trace_link=link_for).trace_posts(trace, steps=False) == []
    assert SlackRenderer(trace_link=link_for).trace_posts(trace, steps=False) == []
    assert DiscordRenderer(trace_link=lambda _: None).trace_posts(
        trace
    ) == DiscordRenderer().trace_posts(trace)
