"""The tools' version (the one source: pyproject.toml reads it) and the
--version option every command has."""
from __future__ import annotations

import argparse

VERSION = "0.1.0"


def add_version_option(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`PROG --version` prints the tools' version and the image format they write."""
    from .image.image_spec import NEWEST_MINOR_READ, VERSION_MAJOR

    format_version = f"{VERSION_MAJOR}.{NEWEST_MINOR_READ}"
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {VERSION} (model image format {format_version})")
    return parser
