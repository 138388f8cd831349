"""Build Zephyr applications of this repository with `west build` or twister
and run them (native_sim executables, QEMU), for the tests in tests/zephyr.

Nothing here downloads Zephyr: ZEPHYR_BASE must name a Zephyr tree (with the
CMSIS_6 module beside it for Cortex-M; scripts/setup-zephyr.sh prepares one).
Builds go to build/zephyr-tests/<app>-<board> and are incremental between
sessions; every process started here is bounded by a timeout and killed (its
whole process group, by id) when it is no longer needed.
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD_ROOT = REPO / "build" / "zephyr-tests"
SETUP_HINT = "scripts/setup-zephyr.sh prepares one (docs/zephyr.md)"

PROMPT = [1, 2, 3]      # what hello_moe feeds (CONFIG_HELLO_MOE_PROMPT) ...
GENERATE = 8            # ... and how many tokens it generates

NATIVE_SIM = "native_sim/native/64"
AN547 = "mps3/corstone300/an547"
AN385 = "mps2/an385"
H747 = "stm32h747i_disco/stm32h747xx/m7"
H750 = "stm32h750b_dk"

# One twister run per toolchain: native_sim builds with the host's, the rest with gnuarmemb.
# (twister names the STM32H750 board with its SoC qualifier)
TWISTER_RUNS = {"native_sim": [NATIVE_SIM],
                "cortex_m": [AN547, AN385, H747, f"{H750}/stm32h750xx"]}
TWISTER_SUITE_ROOTS = ["tests/zephyr", "samples/zephyr"]
# The twister test suite that builds an app as `west build` would: no extra configuration
# (twister adds its run id and suite name, which only ztest's output shows).
TWISTER_SUITE_OF = {"tests/zephyr/colibri_core": "colibri.core",
                    "samples/zephyr/hello_moe": "sample.colibri.hello_moe",
                    "samples/zephyr/isr_forward": "sample.colibri.isr_forward",
                    "samples/zephyr/serial_runner": "sample.colibri.serial_runner",
                    "samples/zephyr/paged_moe": "sample.colibri.paged_moe"}
# Suites twister only builds (their runs need a flash written first:
# tests/zephyr/test_zephyr_paged.py runs them).
TWISTER_BUILD_ONLY = {"sample.colibri.paged_moe"}

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_pytest() -> None:
    """preexec_fn of a long child (west twister): the kernel kills it when
    this pytest process ends, however it ends (kill -9 included), so a
    stopped run leaves no twister building on behind it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


# QEMU machine and CPU of the emulated boards (their board.cmake says the same).
QEMU_MACHINES = {AN547: ("mps3-an547", "cortex-m55"), AN385: ("mps2-an385", "cortex-m3")}
# Zephyr modules a board needs besides Zephyr itself (folder under the workspace).
BOARD_MODULES = {AN547: ["modules/hal/cmsis_6"], AN385: ["modules/hal/cmsis_6"],
                 H747: ["modules/hal/cmsis_6", "modules/hal/stm32"],
                 H750: ["modules/hal/cmsis_6", "modules/hal/stm32"]}


@dataclass(frozen=True)
class ZephyrEnv:
    base: Path          # ZEPHYR_BASE
    west: str           # the west executable

    @property
    def workspace(self) -> Path:
        return self.base.parent


@dataclass(frozen=True)
class Build:
    app: str
    board: str
    directory: Path
    log: str

    @property
    def zephyr_dir(self) -> Path:
        return self.directory / "zephyr"

    @property
    def elf(self) -> Path:
        return self.zephyr_dir / "zephyr.elf"

    @property
    def exe(self) -> Path:
        return self.zephyr_dir / "zephyr.exe"

    def weights(self) -> dict:
        """zephyr/colibri_weights.json: where the build put the model image."""
        return json.loads((self.zephyr_dir / "colibri_weights.json").read_text())

    def memory(self) -> dict[str, tuple[int, int]]:
        """The linker's memory report: region -> (used, size) in bytes."""
        return memory_report(self.log)


def find_env() -> ZephyrEnv | str:
    """The Zephyr tree and west, or why the Zephyr tests cannot run."""
    base = os.environ.get("ZEPHYR_BASE")
    if not base:
        return f"ZEPHYR_BASE is not set: point it at a Zephyr 4.3 tree; {SETUP_HINT}"
    if not (Path(base) / "VERSION").is_file():
        return f"ZEPHYR_BASE={base} is not a Zephyr tree (no VERSION file)"
    west = shutil.which("west") or str(REPO / ".venv" / "bin" / "west")
    if not Path(west).exists():
        return f"west is not installed (pip install west into .venv); {SETUP_HINT}"
    return ZephyrEnv(Path(base), west)


def missing_for_board(env: ZephyrEnv, board: str) -> str | None:
    """Why `board` cannot be built or run here, or None."""
    if board != NATIVE_SIM and shutil.which("arm-none-eabi-gcc") is None:
        return "arm-none-eabi-gcc not installed (Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi)"
    # (a board qualified with its SoC, as twister names it, needs what the board needs)
    for module in BOARD_MODULES.get(board) or BOARD_MODULES.get(board.split("/")[0], []):
        if not (env.workspace / module / "zephyr" / "module.yml").is_file():
            return f"{env.workspace / module} missing (the Zephyr module {board} needs); {SETUP_HINT}"
    return None


def board_env(board: str) -> dict[str, str]:
    # Without the MAKEFLAGS the tests give make (tests/conftest.py): twister
    # reads its -j as a job limit shared by all its builds and then configures
    # and builds one suite at a time.
    env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
    env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    if board == NATIVE_SIM:
        env["ZEPHYR_TOOLCHAIN_VARIANT"] = "host"
    else:
        env["ZEPHYR_TOOLCHAIN_VARIANT"] = "gnuarmemb"
        env.setdefault("GNUARMEMB_TOOLCHAIN_PATH", "/usr")
    return env


def build_dir_for(app: str, board: str) -> Path:
    return BUILD_ROOT / f"{Path(app).name}-{board.replace('/', '_')}"


def west_build(env: ZephyrEnv, app: str, board: str, model_dir: Path, *,
               extra: tuple[str, ...] = (), timeout: float = 900,
               directory: Path | None = None) -> Build:
    """`west build` app (a path under the repository) for board, against the
    converted model in model_dir, into directory (default: build_dir_for).
    Incremental; raises on failure with the log."""
    directory = directory or build_dir_for(app, board)
    cmd = [env.west, "build", "-b", board, "-d", str(directory), str(REPO / app), "--",
           f"-DCOLIBRI_MODEL_DIR={model_dir}", *extra]
    done = subprocess.run(cmd, cwd=REPO, env=board_env(board), capture_output=True, text=True,
                          timeout=timeout, check=False)
    log = done.stdout + done.stderr
    if done.returncode != 0:
        raise AssertionError(f"west build {app} for {board} failed:\n{log[-6000:]}")
    return Build(app, board, directory, log)


@dataclass(frozen=True)
class TwisterRun:
    """One `west twister` over the module's suites and samples, on platforms."""
    platforms: list[str]
    outdir: Path
    returncode: int
    log: str

    def report(self) -> dict:
        return json.loads((self.outdir / "twister.json").read_text())

    def build(self, app: str, board: str) -> Build:
        """The build twister made of app (TWISTER_SUITE_OF) for board."""
        suite = TWISTER_SUITE_OF[app]
        found = sorted((self.outdir / board.replace("/", "_")).glob(f"**/{app}/{suite}/build.log"))
        if not found or not (found[0].parent / "zephyr" / "zephyr.elf").is_file():
            raise AssertionError(f"twister built no {app} for {board}:\n{self.log[-6000:]}")
        return Build(app, board, found[0].parent, found[0].read_text())


def twister(env: ZephyrEnv, model_dir: Path, name: str) -> TwisterRun:
    """`west twister` on TWISTER_RUNS[name] against the converted model in
    model_dir, into BUILD_ROOT/twister/name (a fresh folder)."""
    platforms = TWISTER_RUNS[name]
    outdir = BUILD_ROOT / "twister" / name
    argv = [env.west, "twister", *[a for s in TWISTER_SUITE_ROOTS for a in ("-T", s)],
            *[a for p in platforms for a in ("-p", p)], "--outdir", str(outdir),
            "--clobber-output", "--disable-warnings-as-errors", "-j", "2", "--inline-logs"]
    run_env = board_env(platforms[0])
    run_env["COLIBRI_MODEL_DIR"] = str(model_dir)
    done = subprocess.run(argv, cwd=REPO, env=run_env, capture_output=True, text=True,
                          timeout=1200, preexec_fn=die_with_pytest)
    return TwisterRun(platforms, outdir, done.returncode, done.stdout + done.stderr)


def twister_run_of(board: str) -> str | None:
    """The twister run that builds for board, if one does."""
    return next((name for name, platforms in TWISTER_RUNS.items() if board in platforms), None)


def memory_report(log: str) -> dict[str, tuple[int, int]]:
    units = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
    regions = {}
    pattern = r"^\s*(\w+):\s+(\d+)\s*(B|KB|MB|GB)\s+(\d+)\s*(B|KB|MB|GB)\s+[\d.]+%"
    for m in re.finditer(pattern, log, re.M):
        regions[m.group(1)] = (int(m.group(2)) * units[m.group(3)],
                               int(m.group(4)) * units[m.group(5)])
    return regions


def qemu_argv(build: Build, serial: str = "stdio") -> list[str]:
    """QEMU for an emulated board's build: the ELF, and the model image loaded
    at the address the build wrote into colibri_weights.json."""
    machine, cpu = QEMU_MACHINES[build.board]
    weights = build.weights()
    return ["qemu-system-arm", "-machine", machine, "-cpu", cpu, "-nographic", "-vga", "none",
            "-net", "none", "-monitor", "none", "-serial", serial,
            "-device", f"loader,file={weights['image']},addr={weights['address']},force-raw=on",
            "-kernel", str(build.elf)]


class Process:
    """A child in its own process group; stop() kills that group."""

    def __init__(self, argv: list[str], *, cwd: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.output = ""

    def read_until(self, pattern: str, timeout: float) -> str:
        """Output so far once pattern (a regex) appears, or AssertionError."""
        os.set_blocking(self.proc.stdout.fileno(), False)
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern, re.M)
        while not regex.search(self.output):
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.argv[0]}: no /{pattern}/ within {timeout:.0f} s; "
                                     f"output:\n{self.output[-4000:]}")
            chunk = self.proc.stdout.read()
            if chunk:
                self.output += chunk.decode(errors="replace").replace("\r", "")
            elif self.proc.poll() is not None:
                raise AssertionError(f"{self.argv[0]} exited ({self.proc.returncode}) before "
                                     f"/{pattern}/; output:\n{self.output[-4000:]}")
            else:
                time.sleep(0.05)
        return self.output

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> Process:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_until(argv: list[str], pattern: str, timeout: float, **kwargs) -> str:
    """Start argv, return its output once pattern appears, and kill it."""
    with Process(argv, **kwargs) as proc:
        return proc.read_until(pattern, timeout)


def qemu_run(build: Build, pattern: str, timeout: float) -> str:
    """The build in QEMU (qemu_argv) until pattern appears in its output."""
    return run_until(qemu_argv(build), pattern, timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tokens_line(output: str, label: str = "tokens") -> list[int]:
    m = re.search(rf"^{re.escape(label)}:((?: \d+)+)\s*$", output, re.M)
    if m is None:
        raise AssertionError(f"no '{label}:' line in:\n{output[-3000:]}")
    return [int(t) for t in m.group(1).split()]
