"""Discord adapter: a discord.py bot that shows each run live in one edited message.

- ``render``: pure rendering of a run's state into message payloads (unit-tested offline);
  the ``text`` layout, and the texts both layouts share.
- ``layout``: the ``components`` layout (``discord.layout``, the default): the same state as
  Components V2 cards, within 40 components and 4,000 characters (pure).
- ``access``: who may ask where, and the per-user cooldown (pure).
- ``surface``: the live-message Surface on discord.py messages, and 429 observation.
- ``cog``: the mention listener, ``/ask``, ``/reset``, ``/trace``, the Stop, decision and
  Sources buttons, and a card's LayoutView.
- ``client``: the bot itself, with connections opened in ``setup_hook``.

Imports ``core`` and ``adapters.live`` only; the application hands in the agent, stores and
settings (``bot/serve_discord.py``).
"""
