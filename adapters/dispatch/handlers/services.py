"""What the command handlers work with: the stores, the budgets and the place's choices of
one surface (the same objects its answers use)."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.attachments import ConversationFiles
from adapters.channels import ChannelChoices
from adapters.policy import Policy
from core.budgets import TokenBudgets
from core.stores import Stores


@dataclass(frozen=True, slots=True)
class Services:
    policy: Policy
    stores: Stores
    budgets: TokenBudgets
    choices: ChannelChoices
    files: ConversationFiles | None = None
    """Attached files as knowledge (``files.*``); None: switched off (nothing to drop)."""
