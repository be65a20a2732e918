"""Slack's port for scheduled questions (``adapters.scheduled``): a new root message in the
schedule's channel (or thread), kept current with chat.update like any answer's, its trace
in its thread.

The owner is named by the header alone, as plain text: a ``<@U…>`` in a message the bot
posts on its own would notify them at every run.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.dispatch.checks import Admitted
from adapters.dispatch.handlers.ask import Answering, Follower, Reply
from adapters.dispatch.intents import PlaceKind, Where
from adapters.live import LiveMessage, RunView, Verbosity
from adapters.scheduled import owner_id
from adapters.slack.markdown import escape
from adapters.slack.payloads import Question
from adapters.slack.render import SlackRenderer
from adapters.slack.reply import SlackReply
from adapters.slack.settings_commands import settings_key
from adapters.slack.surface import NotInChannel, SlackSurface, post_root
from core.agent import Run
from core.schedules import Schedule

if TYPE_CHECKING:
    from adapters.slack.bot import SlackBot

log = logging.getLogger(__name__)


class SlackSchedules:
    """``SchedulePort`` of one Slack bot."""

    def __init__(self, bot: SlackBot) -> None:
        self.bot = bot

    @property
    def answering(self) -> Answering[Question]:
        return self.bot.answering

    @property
    def ready(self) -> bool:
        return not self.answering.closing

    def asker(self, schedule: Schedule) -> tuple[Question, str]:
        place = schedule.place
        question = Question(
            source="command",
            team=place.space,
            channel=place.channel,
            user=owner_id(schedule),
            text=schedule.question,
            thread_ts=place.thread or None,
            claim_key=f"schedule:{schedule.id}",
            user_name=schedule.owner_name,
        )
        return question, settings_key(place.space, place.channel)

    def where(self, schedule: Schedule) -> Where:
        place = schedule.place
        kind: PlaceKind = "dm" if place.channel.startswith("D") else "channel"
        thread = place.thread or None
        return Where("slack", kind, place.channel, space=place.space or None, thread=thread)

    def reply(self, schedule: Schedule, ask: Admitted[Question], header: str) -> Reply:
        del schedule
        return ScheduledReply(self.bot, ask.who, header)

    async def say(self, schedule: Schedule, text: str) -> None:
        place = schedule.place
        try:
            await self.bot.client.chat_postMessage(
                channel=place.channel,
                thread_ts=place.thread or None,
                text=escape(text),
                unfurl_links=False,
            )
        except SlackClientError as exc:
            log.warning("could not post in %s for schedule %s: %s", place.channel, schedule.id, exc)


class ScheduledReply(SlackReply):
    """An answer nobody asked in the channel: a new root (never a stream: there is no
    asking message to reply to), headed by the schedule's header."""

    def __init__(self, bot: SlackBot, question: Question, header: str) -> None:
        super().__init__(bot, question)
        self.header = header

    async def open(self, verbosity: Verbosity) -> str | None:
        del verbosity
        q = self.question
        placeholder = SlackRenderer().live(RunView(question=q.text, header=self.header))
        try:
            self.root = await post_root(
                self.bot.client, channel=q.channel, thread_ts=q.thread_ts, message=placeholder
            )
        except (NotInChannel, SlackApiError) as exc:
            log.warning("could not post a scheduled run in %s: %s", q.channel, exc)
            return None
        kind: PlaceKind = "thread" if q.thread_ts else "channel"
        where = Where("slack", kind, q.channel, space=q.team, thread=q.thread_ts)
        return self.bot.dispatcher.conversation(where, root=self.root)

    async def show(self, run: Run, view: RunView) -> Follower:
        """As any answer's message kept current with chat.update, its asker never
        mentioned (``SlackRenderer.quiet_asker``)."""
        q, bot = self.question, self.bot
        surface = SlackSurface(bot.client, channel=q.channel, ts=self.root, thread_ts=q.thread_ts)
        renderer = SlackRenderer(
            run_id=run.trace.id,
            approvals=bot.broker is not None,
            approval_timeout=bot.agent.settings.approval_timeout,
            trace_link=bot.trace_link,
            quiet_asker=True,
        )
        tick = max(1.0, bot.settings.update_interval)
        return LiveMessage(surface, renderer, bot.pacer, view=view, tick=tick)
