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
- ``interactions/receiving-and-responding.mdx`` (Modal): custom_id 1-100 characters, title at
  most 45, 1 to 5 components; ``components/reference.mdx``: a Label's text at most 45 and its
  description 100; a Text Input's custom_id 1-100, style 1 or 2, min_length 0-4000,
  max_length 1-4000, value at most 4000, placeholder at most 100.
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
MODAL_CALLBACK = 9
MODAL_TITLE_LIMIT = 45
MODAL_COMPONENTS = (1, 5)
LABEL_TEXT_LIMIT = 45
LABEL_DESCRIPTION_LIMIT = 100
TEXT_INPUT_LIMIT = 4000
PLACEHOLDER_LIMIT = 100


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
    """An interaction callback: the message it carries, if any, is checked like a message,
    and a modal like a modal."""
    if body.get("type") in MESSAGE_CALLBACKS:
        return message_refusal(body.get("data") or {}, files, at=("data",))
    if body.get("type") == MODAL_CALLBACK:
        return modal_refusal(body.get("data") or {})
    return None


def modal_refusal(modal: Json) -> Refusal | None:
    errors = FormErrors()
    at: Path = ("data",)
    custom_id, title = modal.get("custom_id"), modal.get("title")
    if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= CUSTOM_ID_LIMIT:
        errors.add((*at, "custom_id"), bad_length(1, CUSTOM_ID_LIMIT))
    if not isinstance(title, str) or not 1 <= len(title) <= MODAL_TITLE_LIMIT:
        errors.add((*at, "title"), bad_length(1, MODAL_TITLE_LIMIT))
    components = modal.get("components") or []
    low, high = MODAL_COMPONENTS
    if not low <= len(components) <= high:
        errors.add((*at, "components"), bad_length(low, high))
    for i, component in enumerate(components):
        where = (*at, "components", str(i))
        if component.get("type") == 18:  # a Label around its input
            text, description = component.get("label"), component.get("description")
            if not isinstance(text, str) or not 1 <= len(text) <= LABEL_TEXT_LIMIT:
                errors.add((*where, "label"), bad_length(1, LABEL_TEXT_LIMIT))
            if isinstance(description, str) and len(description) > LABEL_DESCRIPTION_LIMIT:
                errors.add((*where, "description"), max_length(LABEL_DESCRIPTION_LIMIT))
            _check_text_input(component.get("component") or {}, errors, (*where, "component"))
        elif component.get("type") == 1:  # the older ActionRow around one input
            for j, item in enumerate(component.get("components") or []):
                _check_text_input(item, errors, (*where, "components", str(j)))
    return errors.refusal()


def _check_text_input(item: Json, errors: FormErrors, at: Path) -> None:
    if item.get("type") != 4:
        return
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= CUSTOM_ID_LIMIT:
        errors.add((*at, "custom_id"), bad_length(1, CUSTOM_ID_LIMIT))
    if item.get("style") not in (1, 2):
        errors.add(
            (*at, "style"), {"code": "BASE_TYPE_CHOICES", "message": "Value must be one of {1, 2}."}
        )
    for key, low in (("min_length", 0), ("max_length", 1)):
        value = item.get(key)
        if value is not None and not (isinstance(value, int) and low <= value <= TEXT_INPUT_LIMIT):
            errors.add(
                (*at, key),
                {
                    "code": "NUMBER_TYPE_MAX",
                    "message": f"int value should be between {low} and {TEXT_INPUT_LIMIT}.",
                },
            )
    value = item.get("value")
    if isinstance(value, str) and len(value) > TEXT_INPUT_LIMIT:
        errors.add((*at, "value"), max_length(TEXT_INPUT_LIMIT))
    placeholder = item.get("placeholder")
    if isinstance(placeholder, str) and len(placeholder) > PLACEHOLDER_LIMIT:
        errors.add((*at, "placeholder"), max_length(PLACEHOLDER_LIMIT))


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
