"""Every exception class the project defines sits in the one tree drawn in core/errors.py."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import adapters
import bot
import core
from core.errors import ReactbotError


def project_exceptions() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for package in (core, adapters, bot):
        prefix = package.__name__ + "."
        for info in pkgutil.walk_packages(package.__path__, prefix):
            module = importlib.import_module(info.name)
            for _, value in inspect.getmembers(module, inspect.isclass):
                if issubclass(value, BaseException) and value.__module__ == info.name:
                    found.append(value)
    return found


def test_every_exception_the_project_defines_derives_from_reactbot_error() -> None:
    found = project_exceptions()
    names = {f"{c.__module__}.{c.__qualname__}" for c in found}
    assert {"core.files.FileRefused", "adapters.live.EditRejected", "bot.ops.OpsError"} <= names
    outside = sorted(
        f"{c.__module__}.{c.__qualname__}" for c in found if not issubclass(c, ReactbotError)
    )
    assert outside == [], f"outside the ReactbotError tree: {outside}"
