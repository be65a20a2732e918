"""Telegram: private chats answered on the shared pipeline (``adapters.dispatch``)."""
