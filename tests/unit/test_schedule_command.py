"""The schedule command's words (``adapters.dispatch.schedule.parse``) and its listing:
any text parses to one action or to None (the usage is said), never raising; a quoted
``when`` and its question come back as typed; a list fits the room it is given."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from adapters import words
from adapters.dispatch.schedule import Parsed, listing, parse
from core.schedules import Place, Schedule
from core.when import When, parse_when

WHEN = st.text(st.characters(blacklist_characters='"', blacklist_categories=("Cs",)), max_size=60)


@given(st.text(max_size=300))
def test_any_text_is_one_action_or_none(text: str) -> None:
    parsed = parse(text)
    assert parsed is None or parsed.action in ("add", "list", "pause", "resume", "delete", "run")
    if parsed is not None and parsed.action == "add":
        assert parsed.when and parsed.question


@given(WHEN.filter(lambda w: w.strip()), st.text(max_size=200).filter(lambda q: q.strip()))
def test_a_quoted_when_and_its_question_come_back(when: str, question: str) -> None:
    parsed = parse(f'add "{when}" {question}')
    assert parsed == Parsed("add", when=when.strip(), question=question.strip())


def test_the_commands_people_type() -> None:
    assert parse("") == Parsed("list") == parse(" list ")
    assert parse("pause 3f9a0c21") == Parsed("pause", id="3f9a0c21")
    assert parse("run  3f9a0c21 ") == Parsed("run", id="3f9a0c21")
    assert parse("add “every day 09:00 Europe/Paris” What changed?") == Parsed(
        "add", when="every day 09:00 Europe/Paris", question="What changed?"
    )
    for wrong in ("add every day hi", 'add "every day"', "pause", "pause a b", "list x", "nuke"):
        assert parse(wrong) is None, wrong


def schedule(n: int, question: str) -> Schedule:
    when = parse_when("every 2 hours", default_timezone=None, now=0)
    assert isinstance(when, When)
    place = Place("slack", "C1", space="T1")
    return Schedule(f"{n:08x}", "slack:T1:U1", "@ada", place, question, when, next_at=7200)


@given(st.lists(st.text(max_size=500), max_size=40), st.integers(200, 4000))
def test_a_list_fits_its_room_and_says_how_many_more(questions: list[str], room: int) -> None:
    found = [schedule(n, q) for n, q in enumerate(questions)]
    said = listing(found, escape=lambda t: t.replace("<", "&lt;"), room=room)
    if not found:
        assert said == words.SCHEDULES_NONE
        return
    assert len(said) <= room + len(words.schedules_more(len(found)))
    assert said.startswith(words.schedules_header(len(found)))
    assert "<" not in said, "every line escaped"
