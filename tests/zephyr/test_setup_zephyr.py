"""scripts/setup-zephyr.sh as a newcomer uses it: a new workspace laid out
from a Zephyr tree and the CMSIS_6 module given as directories, whose
colibri-env.sh is enough for `west build` to configure a Cortex-M sample; and
the mistakes it refuses with a message."""
from __future__ import annotations

import os
import subprocess

import pytest
from zephyr_helpers import AN547, REPO

SCRIPT = REPO / "scripts" / "setup-zephyr.sh"


def _setup(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "--no-install", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_new_workspace_from_directories_builds_a_sample(zephyr, zephyr_model, tmp_path):
    cmsis = zephyr.workspace / "modules" / "hal" / "cmsis_6"
    if not (cmsis / "zephyr" / "module.yml").is_file():
        pytest.skip(f"no CMSIS_6 module beside {zephyr.base}")
    ws = tmp_path / "ws"
    done = _setup(str(ws), "--zephyr", str(zephyr.base), "--module", f"cmsis_6={cmsis}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (ws / "zephyr" / "VERSION").is_file() and (ws / ".west" / "config").is_file()
    env_file = (ws / "colibri-env.sh").read_text()
    assert f'export ZEPHYR_BASE="{ws}/zephyr"' in env_file
    assert f'export ZEPHYR_MODULES="{ws}/modules/hal/cmsis_6"' in env_file
    build = subprocess.run(
        ["bash", "-c", f". {ws}/colibri-env.sh && west build --cmake-only -b {AN547} "
         f"-d {tmp_path / 'build'} samples/zephyr/hello_moe -- -DCOLIBRI_MODEL_DIR={zephyr_model}"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith("ZEPHYR_")})
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]
    assert f"{ws}/zephyr" in build.stdout


def test_refuses_a_workspace_inside_the_repository():
    done = _setup(str(REPO / "build" / "ws-inside"))
    assert done.returncode != 0 and "is inside the repository" in done.stderr


def test_an_empty_workspace_needs_a_zephyr_source(tmp_path):
    done = _setup(str(tmp_path / "empty"))
    assert done.returncode != 0 and "give --zephyr SRC" in done.stderr
