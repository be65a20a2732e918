"""pydantic's validation errors as the messages ``reactbot`` prints: each names the key
(``tools.mcp.servers[0].url``), what is wrong with its value (never a credential) and the
fix (the file, the default, or the environment variable it came from). ``root`` is the
config's top model (``bot.config.Config``), passed in so this module needs nothing above it."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic_core import ErrorDetails

from bot.config_base import (
    NOT_FROM_FILE,
    TOKEN_LIKE,
    env_key_variable,
    format_loc,
    kind_of,
    redact_url,
)


def describe(
    root: type[BaseModel],
    error: ErrorDetails,
    *,
    file: Path | None,
    overridden: Mapping[tuple[str, ...], str],
) -> str:
    loc = tuple(error["loc"])
    key = format_loc(loc)
    variables = _variables_at(loc, overridden)
    if error["type"] == "extra_forbidden":
        by_var = {var: path for path, var in overridden.items()}
        unknown = _unknown_key(root, loc, env_path=by_var[variables[0]] if variables else None)
        return f"{key}: {unknown}{_from_env(variables)}"
    owner, field = field_at(root, loc)
    what = _what_is_wrong(error, owner, field)
    fix = _from_env(variables) or _fix(loc, owner, field, file)
    return f"{key}: {what}{fix}"


def _variables_at(
    loc: tuple[int | str, ...], overridden: Mapping[tuple[str, ...], str]
) -> list[str]:
    """The variables an error comes from: the one whose value holds the error's key, else
    those that set keys under it (an unknown section, a section's own check)."""
    names = tuple(str(p) for p in loc)
    holding = [var for path, var in overridden.items() if names[: len(path)] == path]
    if holding or not names:
        return holding[:1]
    return [var for path, var in overridden.items() if path[: len(names)] == names]


def _from_env(variables: list[str]) -> str:
    if not variables:
        return ""
    if len(variables) == 1:
        return f". It comes from the {variables[0]} environment variable: fix or unset it."
    return f". It comes from the {_and(variables)} environment variables: fix or unset them."


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _section_at(root: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The section a key path leads to; list indices step into a list of sections
    (``tools.mcp.servers[0]``)."""
    model = root
    for part in loc:
        if isinstance(part, int):
            continue
        info = model.model_fields.get(part)
        found = section_type(info.annotation if info is not None else None)
        if found is None:
            return None
        model = found
    return model


def section_type(annotation: object) -> type[BaseModel] | None:
    """``Section`` itself, or the section of a ``tuple[Section, ...]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is tuple and args and section_type(args[0]) is not None:
        return section_type(args[0])
    return None


def field_at(
    root: type[BaseModel], loc: tuple[int | str, ...]
) -> tuple[type[BaseModel] | None, str | None]:
    """The section model and field name an error location points at (list indices dropped)."""
    names = tuple(p for p in loc if isinstance(p, str))
    if not names:
        return None, None
    owner = _section_at(root, names[:-1])
    if owner is None or names[-1] not in owner.model_fields:
        return None, None
    return owner, names[-1]


def _unknown_key(
    root: type[BaseModel], loc: tuple[int | str, ...], *, env_path: tuple[str, ...] | None = None
) -> str:
    """``env_path``: the key path of the variable that set it, to suggest the variable."""
    section = _section_at(root, loc[:-1])
    if section is None:
        return "unknown key"
    known = [name for name in section.model_fields if name not in NOT_FROM_FILE]
    import difflib  # with an unknown key only, not with every start-up

    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close and env_path is not None and len(env_path) >= len(loc):
        fixed = (*env_path[: len(loc) - 1], close[0], *env_path[len(loc) :])
        return f"unknown key (did you mean {env_key_variable(fixed)}?)"
    if close:
        return f"unknown key (did you mean '{close[0]}'?)"
    return f"unknown key (known keys: {', '.join(known)})"


_TYPE_MESSAGES: Mapping[str, str] = {
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
    "model_type": "must be a mapping of keys",
    "model_attributes_type": "must be a mapping of keys",
    "dict_type": "must be a mapping of keys",
    "path_type": "must be a file path",
    "string_too_short": "must not be empty",
}


def _what_is_wrong(error: ErrorDetails, owner: type[BaseModel] | None, field: str | None) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    got = f" (got {show(error['input'])})"
    if kind == "value_error":
        # A whole entry's problem (a mapping) is said by the message alone.
        shown = "" if isinstance(error["input"], Mapping) else got
        return f"{ctx.get('error', error['msg'])}{shown}"
    if kind == "missing":
        return "is required"
    if kind == "string_type" and isinstance(error["input"], bool):
        return f"must be a string{got}; YAML reads yes, no, on and off as true or false: quote it"
    if kind == "literal_error":
        return f"must be {ctx.get('expected', 'one of the allowed values')}{got}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"{_range_text(ctx, owner, field)}{got}"
    if kind in _TYPE_MESSAGES:
        return f"{_TYPE_MESSAGES[kind]}{got}"
    return f"{error['msg'].rstrip('.')}{got}"


def _range_text(ctx: Mapping[str, Any], owner: type[BaseModel] | None, field: str | None) -> str:
    bounds: dict[str, Any] = dict(ctx)
    if owner is not None and field is not None:
        for meta in owner.model_fields[field].metadata:
            for name in ("gt", "ge", "lt", "le"):
                if isinstance(meta, annotated_types.BaseMetadata) and hasattr(meta, name):
                    bounds[name] = getattr(meta, name)
    low = bounds.get("ge", bounds.get("gt"))
    high = bounds.get("le", bounds.get("lt"))
    if "ge" in bounds and "le" in bounds:
        return f"must be between {low} and {high}"
    if "gt" in bounds and high is not None:
        return f"must be greater than {low} and at most {high}"
    if "gt" in bounds:
        return f"must be greater than {low}"
    if "ge" in bounds:
        return f"must be at least {low}"
    return f"must be at most {high}"


def _fix(
    loc: tuple[int | str, ...],
    owner: type[BaseModel] | None,
    field: str | None,
    file: Path | None,
) -> str:
    where = file.name if file is not None else "the config file"
    if loc and isinstance(loc[-1], int):
        return f". Fix this entry in {where}."
    if owner is None or field is None:
        return ""
    if owner.model_fields[field].is_required():
        return f". Add it in {where}."
    default = owner.model_fields[field].get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        return f". Fix it in {where} or remove the key to use the defaults."
    return f". Fix it in {where} or remove the key to use the default ({_show_default(default)})."


def _show_default(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[]" if not value else "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, str):
        return f"'{value}'" if value else "''"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def show(value: object) -> str:
    """A value for an error message: short, and never a credential."""
    if isinstance(value, str):
        if TOKEN_LIKE.match(value.strip()):
            return "'**********'"
        shown = redact_url(value)
        return repr(shown if len(shown) <= 60 else shown[:57] + "...")
    if isinstance(value, Mapping | list | tuple | set):
        return kind_of(value)
    return repr(value)
