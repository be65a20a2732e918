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
- Components V2 (``components/reference.mdx``; ``resources/message.mdx`` Create and Edit
  Message): with the flag ``IS_COMPONENTS_V2`` (1 << 15) a message holds only components:
  ``content`` or ``embeds`` in the request fail with 400 (the errors tree's code
  ``MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2``, "The 'content' field cannot be
  used when using MessageFlags.IS_COMPONENTS_V2", as quoted in public bots' code); a message
  that had content must reset it to null when an edit sets the flag; the flag can be set by
  an edit but never removed. At most 40 components counted at every depth, 4,000 characters
  across its Text Displays. Shapes: a Text Display (10) has its ``content``; a Section (9)
  one to three Text Displays and an ``accessory`` (a Button or a Thumbnail); a Separator
  (14) ``spacing`` 1 or 2 and ``divider`` a boolean; a Container (17) ``accent_color`` from
  0x000000 to 0xFFFFFF (or null) and children among Action Row, Text Display, Section, Media
  Gallery, Separator and File; a File (13) has its ``file``; a button's
  custom_id 1-100 characters and unique in the message (``COMPONENT_CUSTOM_ID_DUPLICATED``),
  its label 80 at most. The codes of
  the errors for the 40 components and the 4,000 characters are not documented: they are
  modelled as ``BASE_TYPE_MAX_LENGTH`` at ``components`` (the status and code, 400 50035,
  are what discord.py and the bot act on).

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
V2_COMPONENTS_LIMIT = 40
V2_TEXT_LIMIT = 4000
SECTION_TEXTS = (1, 3)
ACCENT_MAX = 0xFFFFFF
TOP_LEVEL_V2 = frozenset({1, 9, 10, 12, 13, 14, 17})
CONTAINER_CHILDREN = frozenset({1, 9, 10, 12, 13, 14})
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
UNKNOWN_CHANNEL = refusal(404, 10003, "Unknown Channel")
UNKNOWN_INTERACTION = refusal(404, 10062, "Unknown interaction")
ALREADY_ACKNOWLEDGED = refusal(400, 40060, "Interaction has already been acknowledged.")
EMPTY_MESSAGE = refusal(400, 50006, "Cannot send an empty message")
TOO_MANY_ATTACHMENTS = refusal(
    400, 30015, "Maximum number of attachments in a message reached (10)"
)
THREAD_EXISTS = refusal(400, 160004, "A thread has already been created for this message")


def legacy_field(name: str) -> Json:
    return {
        "code": "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2",
        "message": f"The '{name}' field cannot be used when using MessageFlags.IS_COMPONENTS_V2",
    }


REQUIRED: Json = {"code": "BASE_TYPE_REQUIRED", "message": "This field is required"}


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
    if is_v2(body, existing):
        _check_v2_message(body, existing, errors, at)
    else:
        content = body.get("content")
        if isinstance(content, str) and len(content) > CONTENT_LIMIT:
            errors.add((*at, "content"), max_length(CONTENT_LIMIT))
        _check_embeds(body.get("embeds") or [], errors, at)
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


# ---- Components V2 --------------------------------------------------------------------------


def is_v2(body: Json, existing: Json | None = None) -> bool:
    """The request sets the flag, or the message already has it (it can never be removed)."""
    flags = int(body.get("flags") or 0) | int((existing or {}).get("flags") or 0)
    return bool(flags & IS_COMPONENTS_V2)


def _check_v2_message(body: Json, existing: Json | None, errors: FormErrors, at: Path) -> None:
    for name in ("content", "embeds"):
        if name in body:
            value = body[name]
            if value not in (None, "", []):
                errors.add((*at, name), legacy_field(name))
        elif existing is not None and existing.get(name) not in (None, "", []):
            errors.add((*at, name), legacy_field(name))  # an upgrade must reset it
    components = body.get("components")
    if components is None:
        return
    count = _V2Count()
    for i, component in enumerate(components):
        _check_v2_component(component, errors, (*at, "components", str(i)), TOP_LEVEL_V2, count)
    if count.components > V2_COMPONENTS_LIMIT:
        errors.add((*at, "components"), max_length(V2_COMPONENTS_LIMIT))
    if count.text > V2_TEXT_LIMIT:
        errors.add((*at, "components"), max_length(V2_TEXT_LIMIT))
    duplicates = {c for c in count.custom_ids if count.custom_ids.count(c) > 1}
    if duplicates:
        errors.add(
            (*at, "components"),
            {
                "code": "COMPONENT_CUSTOM_ID_DUPLICATED",
                "message": "Component custom id cannot be duplicated",
            },
        )


@dataclass(slots=True)
class _V2Count:
    components: int = 0
    text: int = 0
    custom_ids: list[str] = field(default_factory=list)


def _type_error(allowed: frozenset[int]) -> Json:
    return {
        "code": "BASE_TYPE_CHOICES",
        "message": "Value must be one of {" + ", ".join(map(str, sorted(allowed))) + "}.",
    }


def _check_v2_component(
    item: Any, errors: FormErrors, at: Path, allowed: frozenset[int], count: _V2Count
) -> None:
    count.components += 1
    kind = item.get("type") if isinstance(item, dict) else None
    if kind not in allowed:
        errors.add((*at, "type"), _type_error(allowed))
        return
    children = item.get("components")
    match kind:
        case 10:
            content = item.get("content")
            if not isinstance(content, str):
                errors.add((*at, "content"), REQUIRED)
            elif not 1 <= len(content) <= V2_TEXT_LIMIT:
                errors.add((*at, "content"), bad_length(1, V2_TEXT_LIMIT))
            else:
                count.text += len(content)
        case 9:
            low, high = SECTION_TEXTS
            if not isinstance(children, list) or not low <= len(children) <= high:
                errors.add((*at, "components"), bad_length(low, high))
                children = children if isinstance(children, list) else []
            for j, child in enumerate(children):
                where = (*at, "components", str(j))
                _check_v2_component(child, errors, where, frozenset({10}), count)
            accessory = item.get("accessory")
            if not isinstance(accessory, dict):
                errors.add((*at, "accessory"), REQUIRED)
            else:
                _check_v2_component(
                    accessory, errors, (*at, "accessory"), frozenset({2, 11}), count
                )
        case 14:
            if item.get("spacing", 1) not in (1, 2):
                errors.add((*at, "spacing"), _type_error(frozenset({1, 2})))
            if not isinstance(item.get("divider", True), bool):
                errors.add(
                    (*at, "divider"),
                    {"code": "BASE_TYPE_BOOLEAN", "message": "Must be either true or false."},
                )
        case 17:
            accent = item.get("accent_color")
            if accent is not None and not (isinstance(accent, int) and 0 <= accent <= ACCENT_MAX):
                errors.add(
                    (*at, "accent_color"),
                    {
                        "code": "NUMBER_TYPE_MAX",
                        "message": f"int value should be less than or equal to {ACCENT_MAX}.",
                    },
                )
            if not isinstance(children, list) or not children:
                errors.add((*at, "components"), REQUIRED)
                children = []
            for j, child in enumerate(children):
                where = (*at, "components", str(j))
                _check_v2_component(child, errors, where, CONTAINER_CHILDREN, count)
        case 1:
            if not isinstance(children, list) or not 1 <= len(children) <= ROW_ITEMS_LIMIT:
                errors.add((*at, "components"), bad_length(1, ROW_ITEMS_LIMIT))
                children = children if isinstance(children, list) else []
            for j, child in enumerate(children):
                where = (*at, "components", str(j))
                _check_v2_component(child, errors, where, frozenset({2, 3, 5, 6, 7, 8}), count)
        case 2:
            _check_button(item, errors, at, count)
        case 13:
            media = item.get("file")
            if not isinstance(media, dict) or not isinstance(media.get("url"), str):
                errors.add((*at, "file"), REQUIRED)


def _check_button(item: Json, errors: FormErrors, at: Path, count: _V2Count) -> None:
    label = item.get("label")
    if isinstance(label, str) and len(label) > BUTTON_LABEL_LIMIT:
        errors.add((*at, "label"), max_length(BUTTON_LABEL_LIMIT))
    if item.get("style") == 5:  # a link button has a url, no custom_id
        return
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= CUSTOM_ID_LIMIT:
        errors.add((*at, "custom_id"), bad_length(1, CUSTOM_ID_LIMIT))
    else:
        count.custom_ids.append(custom_id)


def components_text(components: Sequence[Any]) -> list[str]:
    """The text of every Text Display in ``components``, at every depth, in order."""
    found: list[str] = []
    for item in components:
        if not isinstance(item, dict):
            continue
        if item.get("type") == 10 and isinstance(item.get("content"), str):
            found.append(item["content"])
        found += components_text(item.get("components") or [])
        if isinstance(item.get("accessory"), dict):
            found += components_text([item["accessory"]])
    return found
