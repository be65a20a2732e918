"""A test-only fifth surface over an in-memory chat platform (issue 41, slice 9): the proof
that a new surface is only its translation (``translate``), its ``Reply`` (``reply``) and its
renderer (``render``); every rule is ``adapters.dispatch``'s, every sentence ``adapters.words``'."""
