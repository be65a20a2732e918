"""Passages overlap (issue 42): a passage is indexed with the last words of the one before it
in its section, so an answer cut by a passage boundary is found, and shown, whole."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from core.files import extract, passages_of
from core.knowledge import LookupTool
from core.tools.lookup import OVERLAP_CHARS, BM25Index, Passage, leads, split_passages
from tests.properties import property_settings

FILLER = "Nothing of note happens in this long paragraph about the garden. "


def _boundary_text() -> str:
    first = (FILLER * 14)[:900] + " The spare key for the cellar"
    second = "is kept under the blue flowerpot by the back door. " + FILLER * 3
    return f"# House\n\n{first}\n\n{second}\n"


def test_the_split_really_falls_inside_the_answer() -> None:
    passages = split_passages("house.md", _boundary_text())
    assert len(passages) == 2
    assert "cellar" in passages[0].text and "flowerpot" not in passages[0].text
    assert "flowerpot" in passages[1].text and "cellar" not in passages[1].text


async def test_an_answer_across_a_passage_boundary_is_found_and_shown_whole(
    tmp_path: Path,
) -> None:
    (tmp_path / "house.md").write_text(_boundary_text(), encoding="utf-8")
    (tmp_path / "other.md").write_text("# Garden\n\nThe blue shed holds the spare rake.\n")
    hits = await LookupTool(tmp_path).search("spare key cellar blue flowerpot", limit=1)
    shown = f"{hits[0].lead} {hits[0].passage.text}"
    assert "cellar" in shown and "flowerpot" in shown
    # An attached file's hit is shown passage by passage (a folder's, as its whole section)
    files = passages_of("house.md", extract("house.md", _boundary_text().encode()))
    result = await LookupTool(top_k=1).with_files(files).run("spare key cellar blue flowerpot")
    assert "The spare key for the cellar is kept under the blue flowerpot" in " ".join(
        result.text.split()
    )


def test_the_overlap_stays_within_a_section_and_a_file() -> None:
    text = "# One\n\n" + "alpha " * 300 + "\n\n# Two\n\n" + "beta " * 10
    passages = split_passages("a.md", text)
    found = leads([*passages, Passage("b.md", ("Two",), "gamma")])
    assert found[0] == "" and found[1].startswith("alpha")
    assert found[-2] == "" and found[-1] == ""  # a new section, then a new file


def test_pages_of_a_pdf_do_not_overlap_so_a_hit_cites_the_page_its_words_are_on() -> None:
    pages = [
        Passage("r.pdf", ("page 2",), "The warranty lasts 36 months."),
        Passage("r.pdf", ("page 3",), "Index"),
        Passage("r.pdf", ("page 3",), "More index"),
    ]
    index = BM25Index(pages)
    assert index.leads == ["", "", "Index"]  # within page 3 only
    assert index.search("warranty months")[0].passage.headings == ("page 2",)


_passages = st.lists(
    st.builds(
        Passage,
        st.sampled_from(["a.md", "b.txt"]),
        st.sampled_from([(), ("H",), ("page 1",), ("page 2",)]),
        st.text(max_size=700),
    ),
    max_size=8,
)


@given(_passages)
@property_settings(300)
def test_each_lead_is_a_short_end_of_the_passage_before(passages: list[Passage]) -> None:
    found = leads(passages)
    assert len(found) == len(passages)
    for before, passage, lead in zip([None, *passages], passages, found, strict=False):
        assert len(lead) <= OVERLAP_CHARS
        if lead:
            assert before is not None and before.file == passage.file
            assert before.headings == passage.headings
            assert before.text.endswith(lead)
