"""The web chat surface: a page, one conversation per browser session, the run live over
Server-Sent Events (``adapters.web.chat``), drawn from JSON states (``adapters.web.render``)."""
