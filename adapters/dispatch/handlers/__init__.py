"""One handler per command intent (``adapters.dispatch.commands`` runs their checks first):
``reset``, ``trace``, ``vote``, ``settings``, ``usage``. Each takes the intent and the
shared ``Services`` and says what the person is told; none knows a surface."""
