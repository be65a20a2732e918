"""The web page's id for a question (``crypto.randomUUID()``), taken only when it is one: any
other value, however hostile, gets an id made by the server (a claim key is never made of
arbitrary text)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from adapters.web.chat import CLIENT_ID, _client_id
from tests.hostile import hostile_text
from tests.properties import property_settings


@property_settings(300)
@given(given_id=st.one_of(hostile_text(), st.none(), st.integers(), st.lists(st.text())))
def test_whatever_is_sent_the_id_is_one(given_id: object) -> None:
    made = _client_id(given_id)
    assert CLIENT_ID.fullmatch(made)
    if not (isinstance(given_id, str) and CLIENT_ID.fullmatch(given_id)):
        assert made != given_id


def test_the_pages_uuid_is_kept_and_a_missing_one_is_made_fresh() -> None:
    page = str(uuid.uuid4())
    assert _client_id(page) == page
    assert _client_id(None) != _client_id(None)
