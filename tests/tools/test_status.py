"""The Python copy of colibri_status (colibri_tools.image.status.Status) equals the
enum in sdk/include/colibri.h, name for name and value for value."""
from __future__ import annotations

import re
from pathlib import Path

from colibri_tools.image.status import Status, status_name

HEADER = Path(__file__).resolve().parents[2] / "sdk" / "include" / "colibri.h"


def test_status_enum_equals_the_public_header():
    body = HEADER.read_text().split("typedef enum colibri_status {", 1)[1].split("}", 1)[0]
    c_values = {name: int(value) for name, value in re.findall(r"(COLIBRI_\w+) = (\d+)", body)}
    assert len(c_values) >= 20
    assert {s.c_name: int(s) for s in Status} == c_values


def test_status_names_read_like_the_header():
    assert status_name(5) == "COLIBRI_E_CHECKSUM (5)"
    assert status_name(Status.OK) == "COLIBRI_OK (0)"
    assert status_name(99) == "unknown status (99)"
