"""``adapters.words.edit_problem``: what an edited input from a person may be."""

from __future__ import annotations

from adapters.words import edit_problem


def test_an_edited_input_must_say_something_and_be_an_object_where_the_tool_takes_one() -> None:
    assert edit_problem("b.txt", json_input=False) is None
    assert edit_problem("  \n", json_input=False) == "The new input is empty."
    assert edit_problem('{"path": "b.txt"}', json_input=True) is None
    assert edit_problem('["b.txt"]', json_input=True) == (
        "That is not a JSON object (not an object)."
    )
    assert edit_problem("{path: b.txt}", json_input=True) == (
        "That is not a JSON object (Expecting property name enclosed in double quotes)."
    )
