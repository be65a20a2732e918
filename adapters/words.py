"""What the bot says to people about their presses and commands: one sentence per meaning,
the same on every surface (issue 41).

A surface renders these (bold, mentions, its emoji codes) but never words its own: a
sentence written inside one surface is one the others lack or say differently. Names of
people come in already rendered by the surface (a Slack or Discord mention, a Telegram
name), or not at all ("the person who asked"). Refusals of a question are here too
(``too_long``, ``cooldown_message``, ``busy_message``), except the budgets' own
(``core.budgets``) and the room's (``adapters.room.BUSY``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo

from core.tools.base import ToolDisplay
from core.trace import clock

if TYPE_CHECKING:
    from core.schedules import Refused, Schedule

__all__ = [
    "ASKING_AGAIN",
    "BUTTONS",
    "DECISION_GONE",
    "DMS_CLOSED",
    "EDIT_BY_REPLY",
    "FILES_OFF",
    "FILES_QUEUED",
    "MESSAGE_TOO_OLD",
    "NAME_SHOWN",
    "NOT_A_FORM",
    "NOT_A_VOTE",
    "NOT_ITS_PLACE",
    "NOT_LISTED",
    "NOT_MINE",
    "NOT_RUNNING",
    "NOT_SPOKEN",
    "NO_APPROVALS",
    "NO_TRACE",
    "ONLY_ADMINS",
    "PERSONA_CLEARED",
    "PICTURES_NOT_SENT",
    "PROMPT_FAILED",
    "READING_FILES",
    "REASON_BY_REPLY",
    "REQUEST_TOO_BIG",
    "RESET_ADMINS",
    "RESET_DONE",
    "RESTARTING",
    "RETRY_DONE",
    "RETRY_GONE",
    "SCHEDULES_NEED_REDIS",
    "SCHEDULES_NONE",
    "SCHEDULES_NOT_KEPT",
    "SCHEDULES_OFF",
    "SCHEDULES_UNREADABLE",
    "SCHEDULE_NOT_YOURS",
    "SCHEDULE_USAGE",
    "SHUTDOWN",
    "STOPPING",
    "STORE_AWAY",
    "UNSAVED",
    "UPLOADS_BUSY",
    "VERBOSITY_CHOICES",
    "VOICE_OFF",
    "VOICE_SILENT",
    "VOTE_LOST",
    "Label",
    "acting",
    "busy_message",
    "by_default",
    "choice_refused",
    "cooldown_message",
    "decide_refused",
    "decided",
    "deciders",
    "dms_for_members",
    "edit_problem",
    "edit_refused",
    "form_failed",
    "heard_line",
    "model_set",
    "models_line",
    "no_such_model",
    "no_such_tool",
    "not_here",
    "now_sees",
    "persona_set",
    "persona_shown",
    "persona_too_long",
    "place_list",
    "run_time",
    "schedule_added",
    "schedule_changed",
    "schedule_header",
    "schedule_line",
    "schedule_missing",
    "schedule_paused_notice",
    "schedule_refused",
    "schedules_header",
    "schedules_more",
    "stop_refused",
    "stopped",
    "too_long",
    "tool_now",
    "tools_line",
    "trace_shown",
    "typed_name",
    "upload_too_big",
    "voice_failed",
    "voice_too_big",
    "voice_too_long",
    "vote_kept",
    "who_may_decide",
]

ASKER = "the person who asked"

NOT_RUNNING = "This answer is no longer running."
"""A Stop, or a decision, on a run that no process runs any more (its process died: the
message is being finished as interrupted, with Retry)."""
NOT_ITS_PLACE = "That button is for an answer somewhere else: nothing was done."
"""A Stop or a decision pressed where the run's message is not (a forged or replayed
button): it acts only on the run of its own place."""
STOPPING = "Stopping…"
MESSAGE_TOO_OLD = "I cannot do that here: the message is too old."
"""A press under a message the platform no longer sends with the press (Telegram leaves out
a message older than 48 hours): nothing was done."""
PROMPT_FAILED = "I could not ask for it here; try Approve or Deny."
EDIT_BY_REPLY = "Reply to my message with the new input."
"""Where a platform has no form, an edit or a reason is a reply to the bot's prompt (Telegram)."""
REASON_BY_REPLY = "Reply to my message with your reason."
"""The ack of a Stop where the platform's ack carries words (Telegram's callback answer)."""
DECISION_GONE = "This action was already decided, or its time ran out."
NO_APPROVALS = "Approvals are not set up on this bot."
RETRY_GONE = "I no longer have that question: please ask it again."
VOTE_LOST = "I could not record that: this run's trace is no longer stored."


def vote_kept(value: str) -> str:
    return f"Thanks, your {'👍' if value == 'up' else '👎'} is recorded on this answer's trace."


RETRY_DONE = "Someone already pressed Retry: this question was asked again once."
ASKING_AGAIN = "Asking again…"
"""A Retry admitted, where the press itself is answered (Telegram's pop-up)."""


def form_failed(problem: str, again: str) -> str:
    """A platform's form (Slack's modal) would not open; ``again``: what to press again."""
    return f"I could not open the form ({problem}); press {again} again."


RESET_DONE = "🧹 I forgot this conversation."
RESET_ADMINS = "Only an admin can reset this conversation here."
FILES_OFF = "⚠️ Attached files are switched off here (files.enabled: false)."
"""A file attached where ``files.enabled`` is false (the terminal, the web chat)."""
READING_FILES = "Reading the attached files"
"""A live message's status while its question's files are read (before step 1)."""
FILES_QUEUED = "Waiting to read the attached files: other people's are read first"
"""…while its files wait their turn for a reader (``files.max_parallel`` are busy)."""
UPLOADS_BUSY = "⚠️ Too many files are arriving right now: try again in a moment."
"""The web chat reads this many uploads at once already (``adapters.web.uploads``)."""
NOT_A_FORM = "The request is not a form with a question and files."
NO_TRACE = "No trace yet in this conversation: ask me something first."
STORE_AWAY = "I cannot read that now: the shared store is unavailable."
VERBOSITY_CHOICES = "Verbosity is full, compact, answer or default."
NOT_A_VOTE = "A vote names its run, and up or down."
NOT_MINE = "That button is not one of mine."
"""A press whose data no button of the bot's carries (a modified client, an old message)."""


def trace_shown(question: str) -> str:
    """Above the last trace's files (``ShowTrace``); the question is outside text, which the
    surface escapes as it draws this."""
    flat = " ".join(question.split())
    return f"🧾 The last trace here: {flat[:199] + '…' if len(flat) > 200 else flat}"


def by_default(level: str) -> str:
    """A setting left at the platform's default, as the settings show it."""
    return f"{level} (the default)"


ONLY_ADMINS = "Only an admin can change the settings here."
UNSAVED = "⚠️ I could not save that: the shared store is unavailable. Try again soon."

# ---- a place's model, persona and tools (``adapters.dispatch.handlers.settings``) ---------
NAME_SHOWN = 80
"""Characters of a name someone typed that a reply repeats (an unknown model or tool)."""
_UNSEEN = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff`*<>@&]")


def typed_name(typed: str) -> str:
    """A name someone typed, as a reply repeats it: at most ``NAME_SHOWN`` characters, with
    no control or direction character and none that Markdown, mrkdwn or HTML read (no
    emphasis, no code, no mention, no ``@everyone``): it is shown, never acted on."""
    return repr(_UNSEEN.sub("", typed.strip()[: NAME_SHOWN * 4])[:NAME_SHOWN])


def models_line(names: Sequence[str]) -> str:
    """The models a place may choose (``model`` without a name)."""
    if not names:
        return "No other models are configured (`models:` in the config)."
    return "Models: " + ", ".join(f"`{n}`" for n in names) + ", or `default`."


def no_such_model(typed: str, names: Sequence[str]) -> str:
    return f"There is no model named {typed_name(typed)}. {models_line(names)}"


def model_set(name: str | None) -> str:
    """A place's model changed (None: back to the default)."""
    return (
        f"This channel now uses `{name}`." if name else "This channel now uses the default model."
    )


def persona_shown(length: int) -> str:
    """How long a place's persona is (never its text: it may be an admin's private brief)."""
    return (
        f"This channel's persona is {length:,} characters."
        if length
        else "This channel has no persona."
    )


def persona_set(length: int) -> str:
    return f"This channel's persona is set ({length:,} characters)." if length else PERSONA_CLEARED


PERSONA_CLEARED = "This channel's persona is cleared."


def persona_too_long(length: int, limit: int) -> str:
    return f"The persona is {length:,} characters long; the limit is {limit:,}."


def tools_line(on: Sequence[str], off: Sequence[str]) -> str:
    """The tools a place's runs may use, and those turned off here."""
    line = "Tools: " + (", ".join(on) if on else "none")
    return line + (" (off here: " + ", ".join(off) + ")" if off else "")


def no_such_tool(typed: str, names: Sequence[str]) -> str:
    return f"There is no tool named {typed_name(typed)}. Tools: {', '.join(names) or 'none'}."


def tool_now(name: str, on: bool) -> str:
    return f"`{name}` is now {'on' if on else 'off'} in this channel."


REQUEST_TOO_BIG = "⚠️ That is too long to send at once; nothing was done."
"""A request over what a surface's transport takes (the web chat's body limit): refused
before it means anything, so before any setting's own limit."""


def choice_refused(problem: str) -> str:
    """A setting that could not be made (an unknown name, a persona too long)."""
    return f"⚠️ {problem}"


def decided(verdict: str, *, with_words: bool = False) -> str:
    """The ack of a decision where the platform's ack carries words: ``with_words`` when the
    person wrote the new input or the reason (a form, a reply to a prompt)."""
    if verdict == "edit":
        return "✏️ Edited: it runs with your input."
    if verdict == "deny":
        return "❌ Denied, with your reason." if with_words else "Denied."
    return "Allowed here from now on." if verdict == "always" else "Approved."


def edit_refused(problem: str) -> str:
    """An edited input that cannot be used (``problem``: why, one sentence)."""
    return f"{problem} Nothing was decided: press Edit… again."


def deciders(approvers: str, asker: str | None = None) -> str:
    """Who may decide on an action (``agent.approval.approvers``), in words: ``asker`` is
    the asker as the surface shows a person (a mention), or None."""
    if approvers == "anyone":
        return "anyone here"
    if approvers == "admins":
        return "an admin"
    return f"{asker or ASKER} or an admin"


def who_may_decide(approvers: str, asker: str | None = None) -> str:
    """The line under an action waiting for a person: ``only … can decide``."""
    who = deciders(approvers, asker)
    return f"{who} can decide" if approvers == "anyone" else f"only {who} can decide"


def stop_refused(asker: str | None = None) -> str:
    """Said privately to someone who pressed another person's Stop."""
    return f"Only {asker or ASKER} or an admin can stop this run."


def stopped(who: str | None, steps: int, *, shown: Callable[[str], str] = str) -> str:
    """A stopped run's outcome, after its ``steps``: who pressed Stop (as the surface
    ``shown`` them: a mention, an escaped name), or the restart (``SHUTDOWN``), or nobody
    named. The surface puts its own ⏹️ mark before it."""
    after = f" after step {steps}" if steps else " before the first step"
    if who == SHUTDOWN:
        return f"Stopped{after}: reactbot was restarting. Ask again in a moment."
    return f"Stopped by {shown(who)}{after}." if who else f"Stopped{after}."


def decide_refused(approvers: str, asker: str | None = None) -> str:
    """Said privately to someone who may not decide on an action."""
    return f"Only {deciders(approvers, asker)} can decide this."


# ---- refusals of a question (the admission chain: adapters.dispatch.checks) ---------------

# Who may ask where (``adapters.dispatch.access``): one meaning on every surface; a surface
# that can name its places (Slack's ``<#C1>``) passes them rendered, never its own sentence.
NOT_LISTED = "Sorry, you're not on the list of people who can ask me questions here."
DMS_CLOSED = "I don't answer direct messages here; ask me in a channel or group where I'm enabled."
PLACES_SHOWN = 10
"""The most places a refusal names (a long allow-list is cut, not recited)."""


def place_list(names: Sequence[str]) -> str:
    """The places a refusal names, as the surface rendered them, the first ``PLACES_SHOWN``."""
    shown = ", ".join(names[:PLACES_SHOWN])
    return f"{shown}, …" if len(names) > PLACES_SHOWN else shown


def not_here(places: str = "") -> str:
    """Asked in a space or place the bot is not enabled in; ``places``: where it is."""
    if places:
        return f"I'm not enabled here; I answer in {places}."
    return "I'm not enabled here; try a channel or group where I am."


def dms_for_members(places: str = "") -> str:
    """A direct message to a bot restricted to some places, from someone who is not listed
    and not a member of them."""
    where = places or "the places I serve"
    return f"I answer direct messages only for members of {where}; ask me there."


RESTARTING = "reactbot is restarting; ask again in a moment."
SHUTDOWN = "a bot restart"
"""``Run.cancel(by=SHUTDOWN)``: stopped because the bot is shutting down (``stopped`` words
it; a trace reads "Stopped by: a bot restart")."""


def too_long(problem: str) -> str:
    return f"⚠️ {problem} Please shorten it and ask again."


def cooldown_message(seconds_left: float) -> str:
    return f"⏳ One moment: you can ask again in {math.ceil(seconds_left)} s."


def busy_message(limit: int) -> str:
    runs = "a question" if limit == 1 else f"{limit} questions"
    return f"⏳ You already have {runs} running; ask again when one has finished."


def edit_problem(text: str, *, json_input: bool) -> str | None:
    """Why an edited input cannot be used (empty; not a JSON object where the tool takes
    one), in words for the person; None when it can."""
    if not text.strip():
        return "The new input is empty."
    if not json_input:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"That is not a JSON object ({str(exc).split(':')[0]})."
    return None if isinstance(value, dict) else "That is not a JSON object (not an object)."


def upload_too_big(files: int, size: str) -> str:
    """A question whose files together exceed what one question may carry."""
    return f"⚠️ At most {files} files of {size} each can be attached to one question."


def now_sees(shown: str) -> str:
    """After an admin changed what a place sees (``verbosity``): ``shown`` as the surface
    emphasises it (``**full**``, ``*full*``)."""
    return f"Here people now see: {shown}."


def acting(display: ToolDisplay | None, name: str) -> tuple[str, str]:
    """A tool at work: its own ``("🔎", "Searching")``, else ``("🛠️", "Running <name>")``
    with ``name`` already rendered (cut and escaped) by the surface."""
    if display is not None:
        return display.emoji, display.verb
    return "🛠️", f"Running {name}"


# ---- scheduled questions (docs/schedules.md) ----------------------------------------------

SCHEDULES_NOT_KEPT = (
    "Schedules live in this process only: without Redis (REDIS_URL) they will not survive a "
    "restart."
)
SCHEDULES_NEED_REDIS = (
    "Schedules need Redis (REDIS_URL) here: without it they live inside one running "
    "`reactbot serve`, which this command cannot reach."
)
QUESTION_SHOWN = 80
"""Characters of a schedule's question shown in a list."""


def run_time(epoch: int, timezone: str = "") -> str:
    """``Mon 7 Dec 2026 09:00`` in the schedule's zone (UTC for intervals and ``in``); a
    time no calendar date can show (a record past the year 9999) is said as such."""
    try:
        at = datetime.fromtimestamp(epoch, ZoneInfo(timezone) if timezone else UTC)
    except (OverflowError, OSError, ValueError):
        return "a time past the year 9999"
    return f"{at:%a} {at.day} {at:%b %Y %H:%M}"


def _runs(times: Sequence[int], timezone: str) -> str:
    zone = timezone or "UTC"
    return ", ".join(run_time(t, timezone) for t in times) + f" ({zone})"


def schedule_added(schedule: Schedule, upcoming: Sequence[int]) -> str:
    times = _runs(upcoming, schedule.timezone) if upcoming else "none"
    return f"⏰ Scheduled {schedule.id}: {schedule.when.text}. Next runs: {times}."


def schedule_refused(refused: Refused) -> str:
    """Why a schedule was not added, in one line."""
    match refused.reason:
        case "who":
            return "Only an admin can add a schedule here."
        case "per_channel":
            return f"This place already has {refused.limit} schedules: delete one first."
        case "per_user":
            return f"You already have {refused.limit} schedules: delete one first."
        case "interval":
            return f"Runs must be at least {_duration(refused.limit)} apart."
        case "question":
            return (
                f"Write the question to ask after the time (at most {refused.limit:,} characters)."
            )
        case "when":
            return refused.text
        case _:
            return "That schedule could not be added."


def _duration(seconds: int) -> str:
    if seconds % 60:
        return f"{seconds} seconds"
    minutes = seconds // 60
    return f"{minutes} minute" + ("s" if minutes != 1 else "")


def schedule_line(schedule: Schedule) -> str:
    """One schedule in a list: id, when, state, next run, owner, last outcome, question."""
    parts = [schedule.id, schedule.when.text, schedule.state]
    due = schedule.next_at if schedule.state == "active" else None
    parts.append(f"next {run_time(due, schedule.timezone)}" if due is not None else "no next run")
    parts.append(f"by {schedule.owner_name or schedule.owner}")
    if schedule.runs:
        last = schedule.runs[-1]
        parts.append(f"last: {last.outcome.replace('_', ' ')}" + (" (late)" if last.late else ""))
    question = " ".join(schedule.question.split())  # one line, whatever breaks it held
    if len(question) > QUESTION_SHOWN:
        question = question[: QUESTION_SHOWN - 1] + "…"
    return " · ".join(parts) + f" · “{question}”"


def schedule_missing(schedule_id: str) -> str:
    shown = schedule_id[:20].replace("@", "@\u200b")
    return f"No schedule {shown} here: `schedule list` shows their ids."


def schedule_changed(
    schedule: Schedule, what: Literal["paused", "resumed", "deleted", "run"]
) -> str:
    if what == "run":
        return f"▶️ {schedule.id} will run in a few seconds."
    if what == "resumed":
        due = schedule.next_at
        after = f" Next run: {_runs([due], schedule.timezone)}." if due is not None else ""
        return f"▶️ Resumed {schedule.id}.{after}"
    return f"{'⏸️ Paused' if what == 'paused' else '🗑️ Deleted'} {schedule.id}."


def schedule_paused_notice(schedule: Schedule) -> str:
    """Told to the owner when the failures in a row paused their schedule."""
    return (
        f"⏸️ Your schedule {schedule.id} ({schedule.when.text}) failed {schedule.failures} "
        f"times in a row, so I paused it. Resume it with: schedule resume {schedule.id}"
    )


SCHEDULE_USAGE = (
    'Usage: schedule add "<when>" <question>, schedule list, schedule pause ID, '
    "schedule resume ID, schedule delete ID, schedule run ID. <when>: "
    '"every monday 09:00 Europe/Paris", "every day 09:00 UTC", "every 2 hours", '
    '"in 30 minutes", "at 2026-12-24 18:00 Europe/Paris" or "0 9 * * MON Europe/Paris".'
)
SCHEDULES_NONE = "⏰ No schedules here."
SCHEDULES_UNREADABLE = "⚠️ I could not reach the schedules. Nothing changed; try again soon."
SCHEDULES_OFF = "⏰ Schedules are not running in this bot."
SCHEDULE_NOT_YOURS = "Only its owner or an admin can change that schedule."


def schedules_header(total: int) -> str:
    return f"⏰ {total:,} schedule{'s' if total != 1 else ''} here:"


def schedules_more(hidden: int) -> str:
    return f"… and {hidden:,} more"


def schedule_header(schedule: Schedule, *, late: bool) -> str:
    """The first line of a scheduled run's message."""
    marker = " · late" if late else ""
    return f"⏰ Scheduled by {schedule.owner_name or 'someone'} · {schedule.when.text}{marker}"


# --- voice notes (adapters.voice) -----------------------------------------------------------

VOICE_OFF = "🎤 I can't listen to voice notes here: speech to text is not set up. Please type it."
VOICE_SILENT = "🎤 I couldn't hear anything in that voice note."
_VOICE_FAILED = {
    "format": "the speech service could not read that audio",
    "auth": "the speech service refused the bot's key",
    "too_big": "it is too large for the speech service",
    "busy": "the speech service is busy",
    "down": "the speech service is unavailable",
    "timeout": "the speech service took too long",
    "empty": "the speech service sent no text",
}


def voice_failed(kind: str) -> str:
    """One line for a transcription that failed (``core.speech.SpeechError.kind``)."""
    why = _VOICE_FAILED.get(kind, "the speech service failed")
    return f"⚠️ I couldn't transcribe that voice note: {why}. Please try again or type it."


def voice_too_long(seconds: float, limit: float) -> str:
    return (
        f"🎤 That voice note is {clock(seconds)} long; I listen to at most {clock(limit)}. "
        "Please send a shorter one or type it."
    )


def voice_too_big(size: str) -> str:
    return f"🎤 That voice note is larger than {size}; please send a shorter one or type it."


HEARD_CHARS = 600
"""Characters of a transcript the live message shows (the whole is the question)."""


def heard_line(text: str, seconds: float | None) -> str:
    """The first line of an answer to a voice note: ``🎤 0:07 · what was heard``, one line,
    at most ``HEARD_CHARS`` characters of it."""
    flat = " ".join(text.split())
    if len(flat) > HEARD_CHARS:
        flat = flat[: HEARD_CHARS - 1] + "…"
    return f"🎤 {clock(seconds)} · {flat}"


PICTURES_NOT_SENT = (
    "🖼️ The pictures for this answer could not be attached here (can the bot upload files?); "
    "they are kept in its trace."
)

NOT_SPOKEN = "🔇 I couldn't read this answer aloud; the text above is the whole of it."

# ---- the memory command (issue 43: people see and delete what is kept about them) ----------
MEMORY_OFF = "🧠 Memory is off here: I keep nothing about you across conversations."
MEMORY_UNREADABLE = "⚠️ I could not reach the memory store. Nothing changed; try again soon."
MEMORY_NONE = "🧠 I keep no memories about you here."
MEMORY_USAGE = "Usage: memory (to list), memory forget ID, memory clear, memory clear channel"
MEMORY_ONLY_ADMINS = "Only an admin of this channel can clear the channel's memories."


def memory_header(total: int) -> str:
    kept = "1 memory" if total == 1 else f"{total:,} memories"
    return f"🧠 {kept} recalled here, newest first (id · text · scope · date):"


def memory_more(hidden: int) -> str:
    return f"… and {hidden:,} more (forget some to see the older ones)"


def memory_scope(scope: Literal["person", "channel"]) -> str:
    return "yours" if scope == "person" else "this channel's"


def memory_forgotten(memory_id: str) -> str:
    return f"🗑️ Forgotten: {memory_id}. The next answer no longer sees it."


def memory_not_found(memory_id: str) -> str:
    return f"No memory {memory_id} of yours is recalled here (list them with the memory command)."


MEMORY_SENT_PRIVATELY = "🧠 I sent you the memories recalled here in our private chat."


def memory_cleared(count: int, scope: Literal["me", "channel"]) -> str:
    whose = "of yours recalled here" if scope == "me" else "of this channel"
    kept = "1 memory" if count == 1 else f"{count:,} memories"
    return f"🗑️ Cleared {kept} {whose}."


def memory_count_only(total: int) -> str:
    kept = "1 memory" if total == 1 else f"{total:,} memories"
    return (
        f"🧠 {kept} recalled here. I list them only in private: start a private chat with "
        "me, then use /memory here again."
    )


# ---- buttons ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Label:
    """A button as people read it on every surface: its emoji and its words (none: the emoji
    alone). A surface that draws the emoji apart (Discord's ``emoji=``) takes the two apart;
    the others show ``str(label)``."""

    emoji: str
    text: str = ""

    def __str__(self) -> str:
        return f"{self.emoji} {self.text}".strip()


BUTTONS: Mapping[str, Label] = {
    "stop": Label("⏹️", "Stop"),
    "retry": Label("🔁", "Retry"),
    "approve": Label("✅", "Approve"),
    "edit": Label("✏️", "Edit…"),
    "deny": Label("❌", "Deny"),
    "reason": Label("💬", "Deny with reason…"),
    "always": Label("♾️", "Allow in this conversation"),
    "sources": Label("🔗", "Sources"),
    "up": Label("👍"),
    "down": Label("👎"),
}
"""Every button the bot draws under its messages, by what it does (``reason``: a deny that
asks for the words first, where the platform has no form: Telegram)."""


def labels_json() -> str:
    """``BUTTONS`` for a page's script: ``{"stop": "⏹️ Stop", ...}``."""
    return json.dumps({name: str(label) for name, label in BUTTONS.items()}, ensure_ascii=False)
