"""Fixtures for the AArch64 port tests (ports/baremetal/aarch64, the
qemu_virt_a72 / rpi4 / jetson_orin_nano boards, ports/linux/cross.mk).

Each tiny model is a random-weight Hugging Face MoE checkpoint converted once
per session; the self-test firmware is built once per model into the
session's temporary BUILD directory. Golden values come from the x86-64
Linux build of the same core (build/host/colibri-run).
"""
from __future__ import annotations

import pathlib
import sys
from dataclasses import dataclass

import pytest

_HERE = pathlib.Path(__file__).resolve().parent
_REPO = _HERE.parents[2]
for _p in (_REPO / "tools", _REPO / "tests", _HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from aarch64_helpers import (  # noqa: E402 (after the sys.path set-up)
    Firmware,
    build_firmware,
    make,
    missing_tool_reason,
    run_firmware,
)
from colibri_tools.board import boards  # noqa: E402

BAREMETAL_BOARD = "qemu_virt_a72"
MODEL_FAMILIES = ["mixtral", "qwen2_moe"]


@dataclass(frozen=True)
class TinyModel:
    family: str
    directory: pathlib.Path       # model.bin, model_config.h, model_tokenizer.json

    @property
    def image(self) -> pathlib.Path:
        return self.directory / "model.bin"

    def config(self, name: str) -> int:
        """A COLIBRI_MODEL_<name> value from model_config.h."""
        for line in (self.directory / "model_config.h").read_text().splitlines():
            words = line.split()
            if len(words) == 3 and words[1] == f"COLIBRI_MODEL_{name}":
                return int(words[2].rstrip("u"), 0)
        raise KeyError(name)


@pytest.fixture(scope="session")
def a72_board() -> boards.Board:
    return boards.load(BAREMETAL_BOARD)


@pytest.fixture(scope="session")
def cross_tools(a72_board) -> str:
    """The board's cross prefix, or skip."""
    reason = missing_tool_reason(f"{a72_board.cross_prefix}gcc", f"{a72_board.cross_prefix}nm")
    if reason:
        pytest.skip(reason)
    return a72_board.cross_prefix


@pytest.fixture(scope="session")
def qemu_system(a72_board) -> str:
    reason = missing_tool_reason(a72_board.emulate["qemu"])
    if reason:
        pytest.skip(reason)
    return a72_board.emulate["qemu"]


@pytest.fixture(scope="session")
def built_once() -> dict:
    """Session cache: pytest may set a parametrized session fixture up again
    when the tests of one parameter are not contiguous; conversions and builds
    are kept here and done once."""
    return {}


@pytest.fixture(scope="session", params=MODEL_FAMILIES)
def tiny_model(request, built_once, tmp_path_factory) -> TinyModel:
    key = ("model", request.param)
    if key not in built_once:
        from colibri_tools.converter.convert import convert
        from hf_models import build_model, save_checkpoint

        root = tmp_path_factory.mktemp(f"a64_{request.param}")
        model, _ = build_model(request.param, seed=3)
        save_checkpoint(model, root / "hf")
        convert(root / "hf", root / "out", context=64, progress=False)
        built_once[key] = TinyModel(request.param, root / "out")
    return built_once[key]


@pytest.fixture(scope="session")
def host_run() -> pathlib.Path:
    """build/host/colibri-run: the x86-64 reference build of the same core."""
    done = make("host")
    if done.returncode != 0:
        pytest.fail(f"`make host` failed:\n{done.stdout}\n{done.stderr}", pytrace=False)
    return _REPO / "build" / "host" / "colibri-run"


@pytest.fixture(scope="session")
def selftest_firmware(a72_board, cross_tools, tiny_model, built_once,
                      tmp_path_factory) -> Firmware:
    key = ("firmware", tiny_model.family)
    if key not in built_once:
        build_dir = tmp_path_factory.mktemp(f"fw_{tiny_model.family}")
        built_once[key] = build_firmware(a72_board, "board_selftest", tiny_model.directory,
                                         build_dir)
    return built_once[key]


@pytest.fixture(scope="session")
def selftest_run(selftest_firmware, qemu_system, tiny_model, built_once):
    """One normal boot of the self-test with the model loaded."""
    key = ("run", tiny_model.family)
    if key not in built_once:
        built_once[key] = run_firmware(selftest_firmware, tiny_model.image)
    return built_once[key]
