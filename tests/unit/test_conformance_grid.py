"""docs/conformance.md is current: the grid the marks in tests/conformance/scenarios.py
render (a run of the strict table has exactly those outcomes; its conftest rewrites the
file after a whole run)."""

from __future__ import annotations

from tests.conformance.grid import GRID, expected, render


def test_the_committed_grid_is_the_one_the_scenarios_render() -> None:
    assert GRID.read_text() == render(expected()), (
        "docs/conformance.md is stale: run `pytest tests/conformance -n 2` and commit it"
    )
