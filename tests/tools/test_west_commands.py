"""west colibri-flash / west colibri-test (issue 12), run by the real west in
the venv, in workspaces made here: colibri as the manifest repository (its
west.yml names zephyr/west-commands.yml under self:) and colibri as a
project of another manifest (west-commands: on its entry). A zephyr/module.yml
cannot carry them: Zephyr validates that file against a schema without such
a key (checked below with Zephyr's own validator when a Zephyr tree is there)."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fw_helpers import REPO, demo_model, firmware

WEST = REPO / ".venv" / "bin" / "west"
pytestmark = pytest.mark.skipif(not WEST.is_file(), reason="west is not in the venv")


def west(ws: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("ZEPHYR_BASE", "WEST_CONFIG_LOCAL")}
    return subprocess.run([str(WEST), *args], cwd=cwd or ws, env=env, capture_output=True,
                          text=True, timeout=300)


def manifest_workspace(tmp: Path) -> Path:
    ws = tmp / "ws"
    (ws / ".west").mkdir(parents=True)
    (ws / "colibri").symlink_to(REPO)
    (ws / ".west" / "config").write_text("[manifest]\npath = colibri\nfile = west.yml\n")
    return ws


def project_workspace(tmp: Path) -> Path:
    ws = tmp / "ws2"
    (ws / ".west").mkdir(parents=True)
    (ws / "app").mkdir()
    (ws / "colibri").symlink_to(REPO)
    (ws / "app" / "west.yml").write_text("""manifest:
  projects:
    - name: colibri
      path: colibri
      url: https://example.invalid/colibri
      west-commands: zephyr/west-commands.yml
""")
    (ws / ".west" / "config").write_text("[manifest]\npath = app\nfile = west.yml\n")
    return ws


def fake_build(tmp: Path, board: str, elf: Path | None = None) -> Path:
    """A Zephyr build directory as far as these commands read it."""
    build = tmp / f"build-{board.replace('/', '_')}"
    (build / "zephyr").mkdir(parents=True)
    (build / "CMakeCache.txt").write_text(f"CMAKE_BUILD_TYPE:STRING=\nBOARD:STRING={board}\n")
    if elf is not None:
        shutil.copy(elf, build / "zephyr" / "zephyr.elf")
    return build


@pytest.mark.parametrize("layout", [manifest_workspace, project_workspace])
def test_west_lists_and_runs_the_commands(layout, tmp_path):
    ws = layout(tmp_path)
    listed = west(ws, "help")
    assert "colibri-flash:" in listed.stdout and "colibri-test:" in listed.stdout, listed.stderr
    build = fake_build(tmp_path, "stm32h750b_dk")
    done = west(ws, "colibri-flash", "-d", str(build), "--weights",
                str(demo_model() / "model.bin"), "--dry-run")
    assert done.returncode == 0, done.stderr
    cmds = [shlex.split(line) for line in done.stdout.splitlines() if not line.startswith("#")]
    west_cmds = [c for c in cmds if c[:2] == ["west", "flash"]]
    assert west_cmds[0][-2:] == ["--extload", "MT25TL01G_STM32H750B-DISCO.stldr"]
    assert all(c[c.index("-r") + 1] == "stm32cubeprogrammer" for c in west_cmds)
    assert all(c[c.index("--build-dir") + 1] == str(build) for c in west_cmds)


def test_unknown_zephyr_board_is_named(tmp_path):
    ws = manifest_workspace(tmp_path)
    build = fake_build(tmp_path, "nrf52840dk/nrf52840")
    done = west(ws, "colibri-flash", "-d", str(build), "--weights", "model.bin", "--dry-run")
    assert done.returncode != 0
    assert "no Colibri board file has zephyr_board = 'nrf52840dk/nrf52840'" in done.stderr
    assert "qemu_an547 (mps3/corstone300/an547)" in done.stderr


@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="qemu-system-arm not installed")
def test_west_colibri_test_boots_the_emulated_board(tmp_path):
    """On qemu_an547 the build's zephyr.elf boots in QEMU and the suite runs
    (here the bare-metal serial runner stands in for a Zephyr build of
    samples/zephyr/serial_runner: the protocol and the board are the same)."""
    from colibri_tools.testing.golden import make_suite, save_suite

    ws = manifest_workspace(tmp_path)
    build = fake_build(tmp_path, "mps3/corstone300/an547", firmware("qemu_an547"))
    suite = save_suite(make_suite(REPO / "models" / "tiny_moe", [([7, 8, 9], 3)],
                                  image=demo_model() / "model.bin"), tmp_path / "suite.json")
    done = west(ws, "colibri-test", str(suite), "-d", str(build), "--weights",
                str(demo_model() / "model.bin"), "--limit", "120")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 0 failed" in done.stdout and "board qemu_an547" in done.stdout


def test_module_yml_cannot_carry_west_commands(tmp_path):
    """Zephyr's zephyr_module.py rejects a module.yml with a west-commands key,
    so the commands live in west.yml / the manifest entry instead."""
    base = os.environ.get("ZEPHYR_BASE") or str(REPO.parent / "shared" / "zephyr" / "zephyr")
    script = Path(base) / "scripts" / "zephyr_module.py"
    if not script.is_file():
        pytest.skip("no Zephyr tree (ZEPHYR_BASE or ../shared/zephyr)")
    module = tmp_path / "mod"
    (module / "zephyr").mkdir(parents=True)
    (module / "ports").symlink_to(REPO / "ports")
    (module / "zephyr" / "module.yml").write_text(
        (REPO / "zephyr" / "module.yml").read_text() + "west-commands: zephyr/west-commands.yml\n")
    args = [sys.executable, str(script), "--modules", str(module), "--cmake-out",
            str(tmp_path / "out.cmake")]
    bad = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "west-commands" in bad.stdout + bad.stderr
    (module / "zephyr" / "module.yml").write_text((REPO / "zephyr" / "module.yml").read_text())
    good = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stderr
