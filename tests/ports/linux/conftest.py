"""Fixtures for the Linux port tests: the host and ASan builds of colibri-run
(built once per session with make) and a small valid model image."""

from __future__ import annotations

import pathlib
import sys

import pytest

_HERE = pathlib.Path(__file__).resolve().parent
_REPO = _HERE.parents[2]
for _p in (_REPO / "tools", _REPO / "tests", _HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from linux_helpers import REPO, make  # noqa: E402


def _build(target: str) -> pathlib.Path:
    done = make(target)
    if done.returncode != 0:
        pytest.fail(f"`make {target}` failed:\n{done.stdout}\n{done.stderr}", pytrace=False)
    return REPO / "build" / target / "colibri-run"


@pytest.fixture(scope="session")
def colibri_run() -> pathlib.Path:
    """build/host/colibri-run, freshly built."""
    return _build("host")


@pytest.fixture(scope="session")
def colibri_run_asan() -> pathlib.Path:
    """build/asan/colibri-run (AddressSanitizer + UBSan), freshly built."""
    return _build("asan")


@pytest.fixture(scope="session", params=["host", "asan"])
def any_run(request) -> pathlib.Path:
    """Each build of colibri-run in turn."""
    return request.getfixturevalue("colibri_run" if request.param == "host"
                                   else "colibri_run_asan")


@pytest.fixture(scope="session")
def tiny_image(tmp_path_factory) -> pathlib.Path:
    """A valid random-weight image (linux_tiny_image.py), written once."""
    from linux_tiny_image import write_tiny_image

    return write_tiny_image(tmp_path_factory.mktemp("tiny") / "model.bin")
