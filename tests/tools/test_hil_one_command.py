"""One-command hardware-in-the-loop (issue 12): `colibri-test run --board B
--firmware F --weights W suite.json` boots the emulated board, runs the suite
against transformers' answers and tears QEMU down; infrastructure problems
are JUnit errors (exit 3), not failures; QEMU dies with its parent on any
signal; colibri-flash says so when no client connects; the pytest plugin
boots a board. Every QEMU here runs under a timeout, and each test checks
that none of its QEMUs is left."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from fw_helpers import REPO, demo_model, firmware

pytestmark = pytest.mark.skipif(subprocess.run(["which", "qemu-system-arm"], capture_output=True)
                                .returncode != 0, reason="qemu-system-arm not installed")
BIN = REPO / ".venv" / "bin"


@pytest.fixture(scope="module")
def fw() -> Path:
    return firmware("qemu_an547")


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    """Golden answers from transformers on the demo checkpoint."""
    from colibri_tools.testing.golden import make_suite, save_suite

    s = make_suite(REPO / "models" / "tiny_moe", [([1, 2, 3], 6), ([40, 41], 4)],
                   image=demo_model() / "model.bin")
    return save_suite(s, tmp_path_factory.mktemp("hil") / "suite.json")


def qemu_pids(marker: str) -> list[int]:
    """QEMU processes whose command line names `marker` (a file of this test)."""
    out = subprocess.run(["pgrep", "-f", f"qemu-system.*{marker}"], capture_output=True,
                         text=True).stdout
    return [int(p) for p in out.split()]


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def _interruptible() -> None:
    """In the child: SIGINT as a terminal gives it. A suite started as a
    background job (`.ci/run &`) inherits SIGINT ignored, and Python then
    installs no KeyboardInterrupt handler: the SIGINT case would test nothing
    but the job control of whoever started pytest. Likewise SIGHUP, which a
    suite started under nohup inherits ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def wait_gone(pids: list[int], seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(Path(f"/proc/{p}").exists() and "zombie" not in _state(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (FileNotFoundError, IndexError):
        return "zombie"


def colibri_test(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "colibri-test"), *args], capture_output=True, text=True,
                          timeout=timeout)


def junit(path: Path) -> ET.Element:
    return ET.parse(path).getroot().find("testsuite")


def test_one_command_boots_runs_and_tears_down(fw, suite, tmp_path):
    done = colibri_test("run", "--board", "qemu_an547", "--firmware", str(fw), "--weights",
                        str(demo_model() / "model.bin"), str(suite), "--junit",
                        str(tmp_path / "j.xml"), "--limit", "120")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 0 failed" in done.stdout and "board qemu_an547" in done.stdout
    s = junit(tmp_path / "j.xml")
    assert (s.get("tests"), s.get("failures"), s.get("errors")) == ("3", "0", "0")
    assert qemu_pids(str(fw)) == []


def test_wrong_firmware_is_refused_before_booting(fw, suite):
    done = colibri_test("run", "--board", "qemu_an500", "--firmware", str(fw), "--weights",
                        str(demo_model() / "model.bin"), str(suite))
    assert done.returncode == 2 and "built for cortex-m55" in done.stderr


def test_infrastructure_problems_are_errors_not_failures(fw, suite, tmp_path):
    closed = colibri_test("run", "--port", "socket://127.0.0.1:9", str(suite),
                          "--connect-timeout", "0.2", "--junit", str(tmp_path / "closed.xml"))
    assert closed.returncode == 3, closed.stdout
    assert "ERROR (the test could not run" in closed.stdout and "2 errors" in closed.stdout
    s = junit(tmp_path / "closed.xml")
    assert (s.get("failures"), s.get("errors")) == ("0", "3")
    assert all(c.find("failure") is None for c in s.iter("testcase"))
    # a QEMU that cannot start: an option it does not know
    text = (REPO / "boards" / "qemu_an547.toml").read_text()
    broken = text.replace('name = "qemu_an547"', 'name = "broken"').replace(
        'extra = ["-icount"', 'extra = ["-no-such-option", "-icount"')
    assert broken != text
    (tmp_path / "broken.toml").write_text(broken)
    done = colibri_test("run", "--board", str(tmp_path / "broken.toml"), "--firmware", str(fw),
                        "--weights", str(demo_model() / "model.bin"), str(suite), "--junit",
                        str(tmp_path / "qemu.xml"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "QEMU exited before listening" in done.stdout and "no-such-option" in done.stdout
    assert junit(tmp_path / "qemu.xml").get("errors") == "3"


LAUNCH = """
import sys, time
sys.path.insert(0, {tools!r})
from colibri_tools.board.qemu import launch
s = launch("qemu_an547", {fw!r}, {weights!r}, timeout=120)
print(s.process.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL],
                         ids=lambda s: s.name)
def test_qemu_dies_with_its_parent(sig, fw):
    """However the process that started QEMU ends, QEMU ends with it."""
    code = LAUNCH.format(tools=str(REPO / "tools"), fw=str(fw),
                         weights=str(demo_model() / "model.bin"))
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              preexec_fn=_interruptible)
    try:
        qemu = int(parent.stdout.readline())
        assert Path(f"/proc/{qemu}").exists()
        parent.send_signal(sig)
        parent.wait(timeout=20)
        assert wait_gone([qemu]), f"QEMU {qemu} outlived its parent after {sig.name}"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_signals_end_a_one_command_run(sig, fw, suite):
    proc = subprocess.Popen([str(BIN / "colibri-test"), "run", "--board", "qemu_an547",
                             "--firmware", str(fw), "--weights", str(demo_model() / "model.bin"),
                             str(suite), "--limit", "120"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 30
        while not children(proc.pid) and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.01)
        qemu = children(proc.pid)
        assert qemu, "QEMU never started"
        status = Path(f"/proc/{proc.pid}/status").read_text()
        proc.send_signal(sig)
        rc = proc.wait(timeout=20)
        assert rc == 128 + sig, (status, proc.stdout.read(), proc.stderr.read())
        assert wait_gone(qemu)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_no_client_is_said_plainly(fw):
    from colibri_tools.board.qemu import free_port

    port = free_port()
    done = subprocess.run([str(BIN / "colibri-flash"), "--board", "qemu_an547", "--firmware",
                           str(fw), "--weights", str(demo_model() / "model.bin"), "--port",
                           str(port), "--timeout", "3"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert f"no client connected to the serial port 127.0.0.1:{port} within 3 s" in done.stderr
    assert "colibri-test run --board qemu_an547" in done.stderr
    assert qemu_pids(str(fw)) == []


INNER = '''
def test_booted(colibri_device):
    assert colibri_device.info.board == "qemu_an547"
    colibri_device.reset()
    assert colibri_device.forward([1, 2]).status == 0

def test_own_board(colibri_boot, colibri_device):
    other = colibri_boot("qemu_an547", {fw!r}, {weights!r})
    other.reset()
    colibri_device.reset()
    assert other.forward([3, 4]).logits_crc == colibri_device.forward([3, 4]).logits_crc
'''


def test_pytest_plugin_boots_a_board(fw, tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER.format(fw=str(fw), weights=str(
        demo_model() / "model.bin")))
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "colibri_tools.testing.pytest_plugin", "test_inner.py",
                           "--colibri-board", "qemu_an547", "--colibri-firmware", str(fw),
                           "--colibri-weights", str(demo_model() / "model.bin")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "2 passed" in done.stdout, done.stdout + done.stderr
    assert qemu_pids(str(fw)) == []
