"""Fixtures for the Cortex-M port tests: a tiny converted model, firmware
builds (once per board per session, in a temporary BUILD directory) and the
x86-64 colibri-run that gives the reference logits."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

_HERE = pathlib.Path(__file__).resolve().parent
_REPO = _HERE.parents[2]
for _p in (_REPO / "tools", _REPO / "tests", _HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from cm_helpers import CC, QEMU, REPO, build_firmware, missing_tools  # noqa: E402


def _require(*tools: str) -> None:
    missing = missing_tools(*tools)
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian: gcc-arm-none-eabi "
                    f"libnewlib-arm-none-eabi qemu-system-arm; scripts/setup.sh)")


@pytest.fixture(scope="session")
def cm_model(tmp_path_factory) -> pathlib.Path:
    """A tiny random Mixtral converted with colibri-convert: model.bin and
    model_config.h in the returned folder."""
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    root = tmp_path_factory.mktemp("cm_model")
    model, _ = build_model("mixtral", seed=0)
    save_checkpoint(model, root / "hf")
    convert(root / "hf", root / "out", context=64, progress=False)
    return root / "out"


@pytest.fixture(scope="session")
def cm_build_dir(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("cm_build")


@pytest.fixture(scope="session")
def need_cc():
    _require(CC)


@pytest.fixture(scope="session")
def cm_firmware(need_cc, cm_model, cm_build_dir):
    """build(board, app="board_selftest_m") -> Firmware, built once per session."""
    built = {}

    def build(board: str, app: str = "board_selftest_m"):
        if (board, app) not in built:
            built[board, app] = build_firmware(board, cm_model, cm_build_dir, app)
        return built[board, app]

    return build


@pytest.fixture(scope="session")
def need_qemu():
    _require(CC, QEMU)


@pytest.fixture(scope="session")
def colibri_run() -> pathlib.Path:
    """build/host/colibri-run (the Linux reference engine), built if needed."""
    done = subprocess.run(["make", "-s", "host"], cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=False)
    if done.returncode != 0:
        pytest.fail(f"make host failed:\n{done.stdout}\n{done.stderr}", pytrace=False)
    return REPO / "build" / "host" / "colibri-run"
