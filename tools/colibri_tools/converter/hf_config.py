"""Typed, checked access to a Hugging Face config.json.

Every problem names the config field and its value: a missing or malformed
value is a CheckpointError, a well-formed value Colibri does not implement is an
UnsupportedModelError.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import CheckpointError, UnsupportedModelError

_MISSING = object()


FLOAT32_MAX = 3.4028234663852886e38


def float32_number(value: object) -> bool:
    """A JSON number (not a bool) that a float32 holds as a finite value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value)) and abs(float(value)) <= FLOAT32_MAX
    except OverflowError:  # an int beyond every float
        return False


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class HFConfig:
    """A config.json dict plus its path, for error messages."""

    def __init__(self, values: dict[str, Any], path: str | Path) -> None:
        self.values = values
        self.path = Path(path)

    def get(self, key: str, default: Any = None) -> Any:
        value = self.values.get(key, default)
        return default if value is None else value

    def raw(self, key: str) -> Any:
        return self.values.get(key)

    def missing(self, key: str) -> CheckpointError:
        return CheckpointError(f"config field {key!r} is missing", path=self.path)

    def unsupported(self, field: str, value: object, reason: str) -> UnsupportedModelError:
        return UnsupportedModelError(field, value, reason, path=self.path)

    def integer(self, key: str, default: Any = _MISSING, *, minimum: int = 0) -> int:
        value = self.values.get(key)
        if value is None:
            if default is _MISSING:
                raise self.missing(key)
            value = default
        if not _is_int(value):
            raise CheckpointError(f"config field {key!r} = {value!r} is not an integer", path=self.path)
        if value < minimum:
            raise self.unsupported(key, value, f"must be >= {minimum}")
        return value

    def first_integer(self, keys: tuple[str, ...], *, minimum: int = 0) -> tuple[str, int]:
        """The first of `keys` present (e.g. num_experts / num_local_experts)."""
        for key in keys:
            if self.values.get(key) is not None:
                return key, self.integer(key, minimum=minimum)
        raise self.missing(" / ".join(keys))

    def number(self, key: str, default: Any = _MISSING) -> float:
        value = self.values.get(key)
        if value is None:
            if default is _MISSING:
                raise self.missing(key)
            value = default
        if not float32_number(value):
            raise CheckpointError(f"config field {key!r} = {_short(value)} is not a finite "
                                  f"number that a float32 holds", path=self.path)
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.values.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise CheckpointError(f"config field {key!r} = {value!r} is not true/false", path=self.path)
        return value

    def int_list(self, key: str) -> list[int]:
        value = self.values.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(_is_int(v) for v in value):
            raise CheckpointError(f"config field {key!r} = {value!r} is not a list of integers",
                                  path=self.path)
        return value

    def reject_if(self, key: str, bad: Callable[[Any], bool], reason: str) -> None:
        value = self.values.get(key)
        if bad(value):
            raise self.unsupported(key, value, reason)
