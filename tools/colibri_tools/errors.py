"""One exception family for every Colibri tool.

Every error names where it happened: the file (or "<bytes>") and, when it is
about bytes, the offset. Callers catch ColibriError; the CLI prints it and
exits non-zero.
"""

from __future__ import annotations

from pathlib import Path


def _where(path: str | Path | None, offset: int | None) -> str:
    parts = []
    if path is not None:
        parts.append(str(path))
    if offset is not None:
        parts.append(f"offset {offset} (0x{offset:X})")
    return ", ".join(parts)


class ColibriError(Exception):
    """Base of every error raised by colibri_tools."""

    def __init__(self, message: str, *, path: str | Path | None = None,
                 offset: int | None = None) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.offset = offset
        where = _where(path, offset)
        super().__init__(f"{where}: {message}" if where else message)


class CheckpointError(ColibriError):
    """A Hugging Face checkpoint is missing, truncated, corrupt or inconsistent."""


class UnsupportedModelError(ColibriError):
    """A checkpoint's config asks for something Colibri does not implement.

    `field` and `value` name the config entry responsible.
    """

    def __init__(self, field: str, value: object, reason: str, *,
                 path: str | Path | None = None) -> None:
        self.field = field
        self.value = value
        super().__init__(f"unsupported {field} = {value!r}: {reason}", path=path)


class ImageFormatError(ColibriError):
    """A model image breaks docs/format.md.

    `status` is the name of the colibri_status the C reader reports for the
    same defect (for example "COLIBRI_E_BAD_MAGIC").
    """

    def __init__(self, message: str, *, status: str, path: str | Path | None = None,
                 offset: int | None = None) -> None:
        self.status = status
        super().__init__(f"{message} [{status}]", path=path, offset=offset)


class OptionError(ColibriError):
    """A tool was called with an invalid option (context, alignment, ...)."""
