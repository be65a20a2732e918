"""Telegram: private chats answered on the shared pipeline (``adapters.answering``)."""
