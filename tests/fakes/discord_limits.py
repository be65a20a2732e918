"""What Discord refuses in a message, a thread or an interaction reply, and how it says so.

Pure functions from a request body to a ``Refusal`` (HTTP status and JSON body), or None when
Discord would accept it. The fake answers with these; discord.py turns them into
``HTTPException`` (``code``, and ``text`` flattened from the ``errors`` tree).

Sources (discord/discord-api-docs, ``developers/``):
- ``resources/message.mdx``: content up to 2000 characters; up to 10 embeds; embed limits
  (title 256, description 4096, 25 fields, field name 256 / value 1024, footer text 2048,
  author name 256, 6000 across every embed of the message; leading and trailing whitespace is
  not counted); at least one of content, embeds, sticker_ids, components, files, poll.
- ``components/reference.mdx``: legacy messages take up to 5 action rows of up to 5 buttons;
  a button label is at most 80 characters, a custom_id 1 to 100.
- ``resources/channel.mdx`` (Start Thread from Message): name is 1-100 characters.
- ``topics/opcodes-and-status-codes.mdx``: 30015 (more than 10 attachments), 50006 (empty
  message), 50035 (invalid form body), 160004 (a thread already exists for the message).
- ``reference.mdx`` (Error Messages): the nested ``errors`` tree with ``_errors`` lists.

The exact bodies and messages were checked against bodies quoted in public issues, e.g.
``{"message": "Cannot send an empty message", "code": 50006}`` (discord-php/DiscordPHP#797),
``embeds._errors`` MAX_EMBED_SIZE_EXCEEDED (NelsonDane/auto-rsa#451), ``embeds`` "Must be 10 or
fewer in length." (member-gentei/member-gentei#127), ``name[BASE_TYPE_BAD_LENGTH]: Must be
between 1 and 100 in length.`` (LandOfTheRair/LandOfTheRair#441), ``data.content`` for an
interaction callback (philpax/exilent#58).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]
Path = tuple[str, ...]

CONTENT_LIMIT = 2000
EMBEDS_LIMIT = 10
EMBEDS_TOTAL_LIMIT = 6000
EMBED_TEXT_LIMITS: tuple[tuple[Path, int], ...] = (
    (("title",), 256),
    (("description",), 4096),
    (("footer", "text"), 2048),
    (("author", "name"), 256),
)
FIELDS_LIMIT = 25
FIELD_NAME_LIMIT = 256
FIELD_VALUE_LIMIT = 1024
FILES_LIMIT = 10
ACTION_ROWS_LIMIT = 5
ROW_ITEMS_LIMIT = 5
BUTTON_LABEL_LIMIT = 80
CUSTOM_ID_LIMIT = 100
THREAD_NAME_LIMIT = 100
IS_COMPONENTS_V2 = 1 << 15
MESSAGE_CALLBACKS = (4, 7)  # CHANNEL_MESSAGE_WITH_SOURCE, UPDATE_MESSAGE: they carry a message


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    body: Json


def refusal(status: int, code: int, message: str) -> Refusal:
    return Refusal(status, {"message": message, "code": code})


UNAUTHORIZED = refusal(401, 0, "401: Unauthorized")
INVALID_WEBHOOK_TOKEN = refusal(401, 50027, "Invalid Webhook Token")
MISSING_PERMISSIONS = refusal(403, 50013, "Missing Permissions")
UNKNOWN_MESSAGE = refusal(404, 10008, "Unknown Message")
UNKNOWN_INTERACTION = refusal(404, 10062, "Unknown interaction")
ALREADY_ACKNOWLEDGED = refusal(400, 40060, "Interaction has already been acknowledged.")
EMPTY_MESSAGE = refusal(400, 50006, "Cannot send an empty message")
TOO_MANY_ATTACHMENTS = refusal(
    400, 30015, "Maximum number of attachments in a message reached (10)"
)
THREAD_EXISTS = refusal(400, 160004, "A thread has already been created for this message")


def invalid_form(errors: Json) -> Refusal:
    return Refusal(400, {"code": 50035, "message": "Invalid Form Body", "errors": errors})


def max_length(limit: int) -> Json:
    return {"code": "BASE_TYPE_MAX_LENGTH", "message": f"Must be {limit} or fewer in length."}


def bad_length(low: int, high: int) -> Json:
    return {
        "code": "BASE_TYPE_BAD_LENGTH",
        "message": f"Must be between {low} and {high} in length.",
    }


EMBED_SIZE_EXCEEDED: Json = {
    "code": "MAX_EMBED_SIZE_EXCEEDED",
    "message": f"Embed size exceeds maximum size of {EMBEDS_TOTAL_LIMIT}",
}


@dataclass(slots=True)
class FormErrors:
    """Errors by path, rendered as Discord's nested tree: list indexes become string keys."""

    found: list[tuple[Path, Json]] = field(default_factory=list)

    def add(self, path: Path, error: Json) -> None:
        self.found.append((path, error))

    def tree(self) -> Json:
        root: Json = {}
        for path, error in self.found:
            node = root
            for key in path:
                node = node.setdefault(key, {})
            node.setdefault("_errors", []).append(error)
        return root

    def refusal(self) -> Refusal | None:
        return invalid_form(self.tree()) if self.found else None


# ---- messages -----------------------------------------------------------------------------


def message_refusal(
    body: Json, files: int = 0, *, existing: Json | None = None, at: Path = ()
) -> Refusal | None:
    """A message create (``existing`` None) or edit; ``at`` prefixes error paths (``data``
    for an interaction callback)."""
    errors = FormErrors()
    content = body.get("content")
    if isinstance(content, str) and len(content) > CONTENT_LIMIT:
        errors.add((*at, "content"), max_length(CONTENT_LIMIT))
    _check_embeds(body.get("embeds") or [], errors, at)
    if not int(body.get("flags") or 0) & IS_COMPONENTS_V2:
        _check_legacy_components(body.get("components") or [], errors, at)
    found = errors.refusal()
    if found is not None:
        return found
    if files > FILES_LIMIT:
        return TOO_MANY_ATTACHMENTS
    if _is_empty(body if existing is None else {**existing, **body}, files):
        return EMPTY_MESSAGE
    return None


def callback_refusal(body: Json, files: int = 0) -> Refusal | None:
    """An interaction callback: the message it carries, if any, is checked like a message."""
    if body.get("type") in MESSAGE_CALLBACKS:
        return message_refusal(body.get("data") or {}, files, at=("data",))
    return None


def thread_refusal(body: Json) -> Refusal | None:
    name = body.get("name")
    if not isinstance(name, str) or not 1 <= len(name) <= THREAD_NAME_LIMIT:
        errors = FormErrors()
        errors.add(("name",), bad_length(1, THREAD_NAME_LIMIT))
        return errors.refusal()
    return None


def _is_empty(message: Json, files: int) -> bool:
    content = message.get("content")
    has_text = isinstance(content, str) and content.strip() != ""
    kept = message.get("attachments") or []
    parts = (message.get("embeds"), message.get("components"), message.get("sticker_ids"))
    return not (has_text or files or kept or any(parts) or message.get("poll"))


def _text_at(embed: Json, path: Path) -> str:
    node: Any = embed
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node.strip() if isinstance(node, str) else ""


def _check_embeds(embeds: Sequence[Json], errors: FormErrors, at: Path) -> None:
    if len(embeds) > EMBEDS_LIMIT:
        errors.add((*at, "embeds"), max_length(EMBEDS_LIMIT))
        return
    total = 0
    for i, embed in enumerate(embeds):
        where = (*at, "embeds", str(i))
        for path, limit in EMBED_TEXT_LIMITS:
            text = _text_at(embed, path)
            total += len(text)
            if len(text) > limit:
                errors.add((*where, *path), max_length(limit))
        fields = embed.get("fields") or []
        if len(fields) > FIELDS_LIMIT:
            errors.add((*where, "fields"), max_length(FIELDS_LIMIT))
            continue
        for j, item in enumerate(fields):
            for key, limit in (("name", FIELD_NAME_LIMIT), ("value", FIELD_VALUE_LIMIT)):
                text = _text_at(item, (key,))
                total += len(text)
                if len(text) > limit:
                    errors.add((*where, "fields", str(j), key), max_length(limit))
    if total > EMBEDS_TOTAL_LIMIT:
        errors.add((*at, "embeds"), EMBED_SIZE_EXCEEDED)


def _check_legacy_components(rows: Sequence[Json], errors: FormErrors, at: Path) -> None:
    if len(rows) > ACTION_ROWS_LIMIT:
        errors.add((*at, "components"), max_length(ACTION_ROWS_LIMIT))
        return
    for i, row in enumerate(rows):
        where = (*at, "components", str(i), "components")
        items = row.get("components") or []
        if len(items) > ROW_ITEMS_LIMIT:
            errors.add(where, max_length(ROW_ITEMS_LIMIT))
            continue
        for j, item in enumerate(items):
            label = item.get("label")
            if isinstance(label, str) and len(label) > BUTTON_LABEL_LIMIT:
                errors.add((*where, str(j), "label"), max_length(BUTTON_LABEL_LIMIT))
            custom_id = item.get("custom_id")
            if isinstance(custom_id, str) and not 1 <= len(custom_id) <= CUSTOM_ID_LIMIT:
                errors.add((*where, str(j), "custom_id"), bad_length(1, CUSTOM_ID_LIMIT))
