"""Overriding kernelscope's settings for a block of a test, with the previous settings back afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kernelscope.config import Settings, get_settings, set_settings


@contextmanager
def override_settings(base: Settings | None = None, /, **changes: Any) -> Iterator[Settings]:
    """Puts ``base`` (the settings in force when left out), with ``changes`` applied, in force for the block
    and yields them; the settings in force before come back on leaving it, by an exception too. A change
    names a field of Settings: a misspelt one is refused rather than quietly ignored."""
    unknown = sorted(set(changes) - set(Settings.model_fields))
    if unknown:
        raise TypeError(f"not fields of Settings: {', '.join(unknown)}")
    before = get_settings()
    settings = (before if base is None else base).model_copy(update=changes)
    set_settings(settings)
    try:
        yield settings
    finally:
        set_settings(before)
