"""Fixtures for the Zephyr port tests: the Zephyr tree (or a skip saying why
not), a tiny converted model in a stable folder (so Zephyr builds stay
incremental between sessions), the Linux reference engine, and builds and
twister runs that are made once per session."""
from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[1]
for _p in (_REPO / "tools", _REPO / "tests", _HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from zephyr_helpers import (  # noqa: E402
    BUILD_ROOT,
    GENERATE,
    PROMPT,
    TWISTER_RUNS,
    TWISTER_SUITE_OF,
    Build,
    TwisterRun,
    find_env,
    missing_for_board,
    twister,
    twister_run_of,
    west_build,
)


@pytest.fixture(scope="session")
def zephyr():
    env = find_env()
    if isinstance(env, str):
        pytest.skip(env)
    return env


@pytest.fixture(scope="session")
def zephyr_model(tmp_path_factory) -> Path:
    """A tiny random Mixtral converted with colibri-convert --experts-last, in
    build/zephyr-tests/model (files rewritten only when their bytes change)."""
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    root = tmp_path_factory.mktemp("zephyr_model")
    model, _ = build_model("mixtral", seed=0)
    save_checkpoint(model, root / "hf")
    # experts last (format 1.9): the same in-place runs, and samples/zephyr/paged_moe too
    convert(root / "hf", root / "out", context=64, progress=False, experts_last=True)
    stable = BUILD_ROOT / "model"
    stable.mkdir(parents=True, exist_ok=True)
    for name in ("model.bin", "model_config.h"):
        new, old = root / "out" / name, stable / name
        if not old.exists() or not filecmp.cmp(new, old, shallow=False):
            shutil.copyfile(new, old)
    (stable / "hf").mkdir(exist_ok=True)
    for item in (root / "hf").iterdir():
        shutil.copyfile(item, stable / "hf" / item.name)
    return stable


@pytest.fixture(scope="session")
def colibri_run() -> Path:
    """build/host/colibri-run, the Linux build of the same core (golden values)."""
    done = subprocess.run(["make", "-s", "host"], cwd=_REPO, capture_output=True, text=True,
                          timeout=600, check=False)
    if done.returncode != 0:
        pytest.fail(f"make host failed:\n{done.stdout}\n{done.stderr}", pytrace=False)
    return _REPO / "build" / "host" / "colibri-run"


@pytest.fixture(scope="session")
def reference_tokens(colibri_run, zephyr_model) -> list[int]:
    """Greedy tokens of the Linux build for PROMPT."""
    done = subprocess.run([str(colibri_run), str(zephyr_model / "model.bin"), "--ids",
                           ",".join(map(str, PROMPT)), "--gen", str(GENERATE)],
                          capture_output=True, text=True, timeout=60, check=True)
    return [int(t) for t in done.stdout.split()]


@pytest.fixture(scope="session")
def twister_run(zephyr, zephyr_model, colibri_run):
    """run(name) -> TwisterRun of TWISTER_RUNS[name], once per session
    (colibri_run: the ztest suite's golden values come from it at build time)."""
    runs: dict[str, TwisterRun] = {}

    def run(name: str) -> TwisterRun:
        if name not in runs:
            runs[name] = twister(zephyr, zephyr_model, name)
        return runs[name]

    return run


def _twister_can_run(zephyr, name: str) -> bool:
    return all(missing_for_board(zephyr, board) is None for board in TWISTER_RUNS[name])


@pytest.fixture(scope="session")
def zephyr_build(zephyr, zephyr_model, colibri_run, twister_run):
    """build(app, board) -> Build, once per session: twister's build when
    its run for the board builds app unchanged (TWISTER_SUITE_OF) and can run
    here, else `west build`."""
    built: dict[tuple[str, str], Build] = {}

    def build(app: str, board: str) -> Build:
        reason = missing_for_board(zephyr, board)
        if reason:
            pytest.skip(reason)
        if (app, board) not in built:
            run = twister_run_of(board)
            if app in TWISTER_SUITE_OF and run and _twister_can_run(zephyr, run):
                built[app, board] = twister_run(run).build(app, board)
            else:
                built[app, board] = west_build(zephyr, app, board, zephyr_model)
        return built[app, board]

    return build


@pytest.fixture
def need_qemu():
    if shutil.which("qemu-system-arm") is None:
        pytest.skip("qemu-system-arm not installed (Debian: qemu-system-arm)")


_TWISTER_SUMMARY: list[str] = []


@pytest.fixture(scope="session")
def twister_summary() -> list[str]:
    """Lines the twister tests want in the session's closing summary."""
    return _TWISTER_SUMMARY


def pytest_terminal_summary(terminalreporter):
    if _TWISTER_SUMMARY:
        terminalreporter.section("Zephyr twister")
        for line in _TWISTER_SUMMARY:
            terminalreporter.write_line(line)
