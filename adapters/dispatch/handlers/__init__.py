"""One module per intent's handler (docs/plans/dispatcher.md §5.3): what an intent does once
its checks passed, written once for every surface. Commands (``reset``, ``trace``, ``vote``,
``settings``, ``usage``; ``adapters.dispatch.commands`` runs their checks first) take the
intent and the shared ``Services`` and say what the person is told; presses on a run's
buttons (``stop``, ``decide``, ``retry``) act on the run their record names; ``ask`` is a
question's admission and its run's life. None knows a surface."""
