"""Boot an emulated board in QEMU from its board file's [emulate] table.

    with launch("qemu_virt_a72", "firmware.elf", "model.bin", timeout=60) as board:
        port = board.open_serial()            # pyserial, over socket://127.0.0.1:PORT
        ...
    result = run("qemu_an500", "firmware.elf", "model.bin", timeout=30)   # serial on stdio
    print(result.returncode, result.output)

The firmware goes in with -kernel (an ELF; a HEX through the generic loader);
the weights with QEMU's generic loader at the board's weight address: a raw
model.bin as `-device loader,file=...,addr=0x...,force-raw=on`, a weights HEX
as `-device loader,file=...` (the loader reads Intel HEX records itself).

QEMU silently loads nothing where the machine has no memory (the virt machine
with less than -m 2G and weights at 0x90000000, for instance), so two checks
stand guard: before the launch, the board's weight region must lie inside the
machine's RAM as QEMU 7.2 lays it out (known machines); after the load and
before the CPU runs (-S), the weights are read back from the emulated memory
over QMP (pmemsave) and compared byte for byte with the file.

Every QEMU started here is bounded by a timeout and killed when its session
closes, when the timeout passes, or when the Python process exits, however
it exits: the kernel kills QEMU when its parent dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from ..errors import ColibriError
from .boards import Board, Region, load
from .hex_firmware import Piece
from .hex_image import compare_dump, hex_extent, is_hex_file
from .hex_records import span

MiB = 1 << 20
VIRT_RAM_BASE = 0x40000000
VIRT_DEFAULT_MEMORY = 128 * MiB
SEMIHOSTING = ["-semihosting-config", "enable=on,target=native"]
# No network device on any board: no firmware here uses one, and the default
# NIC of -M virt makes QEMU load a PXE option ROM (efi-virtio.rom, from
# Debian's ipxe-qemu, which qemu-system-arm only recommends).
NO_NETWORK = ["-nic", "none"]
INSTALL_HINT = "install it with: apt-get install qemu-system-arm (it provides {tool} too)"
LISTEN_TIMEOUT = 10.0

# RAM and ROM windows of fixed-memory machines as QEMU 7.2's `info mtree` shows
# them. The virt machine has RAM from 1 GiB, as large as -m.
MACHINE_MEMORY: dict[str, tuple[Region, ...]] = {
    "mps2-an385": (Region(0x0, 4 * MiB), Region(0x20000000, 4 * MiB), Region(0x21000000, 16 * MiB)),
    "mps2-an386": (Region(0x0, 4 * MiB), Region(0x20000000, 4 * MiB), Region(0x21000000, 16 * MiB)),
    "mps2-an500": (Region(0x0, 4 * MiB), Region(0x20000000, 4 * MiB), Region(0x60000000, 16 * MiB)),
    "mps3-an547": (Region(0x0, 512 << 10), Region(0x01000000, 2 * MiB),
                   Region(0x10000000, 512 << 10), Region(0x20000000, 512 << 10),
                   Region(0x21000000, 4 * MiB), Region(0x28000000, 8 * MiB),
                   Region(0x30000000, 512 << 10), Region(0x60000000, 2048 * MiB)),
}


class QemuError(ColibriError):
    """QEMU is missing, the board cannot be emulated, or the emulated run failed."""


@dataclass(frozen=True)
class Emulation:
    """A board's [emulate] table."""

    binary: str
    machine: str
    cpu: str
    memory: str
    extra: tuple[str, ...]


def emulation(board: Board) -> Emulation:
    e = board.emulate
    if not e or "qemu" not in e or "machine" not in e:
        raise QemuError(f"board {board.name} cannot be emulated: its board file has no "
                        f"[emulate] table with 'qemu' and 'machine'", path=board.path)
    return Emulation(str(e["qemu"]), str(e["machine"]), str(e.get("cpu", "")),
                     str(e.get("memory", "")), tuple(str(a) for a in e.get("extra", [])))


def parse_size(text: str) -> int:
    """A QEMU -m size ("2G", "512M", "1536" = MiB) in bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if not m:
        raise QemuError(f"cannot read the memory size {text!r} (expected e.g. 2G or 512M)")
    scale = {"": MiB, "K": 1 << 10, "M": MiB, "G": 1 << 30, "T": 1 << 40}[m.group(2).upper()]
    return int(float(m.group(1)) * scale)


def machine_memory(emu: Emulation) -> tuple[Region, ...] | None:
    """The machine's RAM/ROM windows, or None for a machine not known here."""
    if emu.machine.split("-")[0] == "virt":
        size = parse_size(emu.memory) if emu.memory else VIRT_DEFAULT_MEMORY
        return (Region(VIRT_RAM_BASE, size),)
    return MACHINE_MEMORY.get(emu.machine)


def check_weight_region(board: Board) -> None:
    """Refuse a board whose weight region lies outside the emulated machine's memory."""
    emu = emulation(board)
    windows = machine_memory(emu)
    w = board.weights
    if windows is None or any(r.origin <= w.origin and w.end <= r.end for r in windows):
        return
    have = ", ".join(span(r.origin, r.end) for r in windows)
    hint = ""
    if emu.machine.startswith("virt") and w.origin >= VIRT_RAM_BASE:
        need = -(-(w.end - VIRT_RAM_BASE) // (1 << 30))
        hint = f"; set [emulate] memory to at least \"{need}G\""
    raise QemuError(f"board {board.name}'s weight region {span(w.origin, w.end)} is not inside "
                    f"the memory of QEMU machine {emu.machine}"
                    f"{' with -m ' + emu.memory if emu.memory else ''} ({have}): QEMU would "
                    f"silently load nothing there{hint}", path=board.path)


def require_binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise QemuError(f"{name} not found; {INSTALL_HINT.format(tool=name)}")
    return path


def _option_value(path: Path) -> str:
    return str(path).replace(",", ",,")     # QEMU option syntax doubles commas


def firmware_args(board: Board, firmware: str | Path) -> list[str]:
    firmware = Path(firmware)
    if is_hex_file(firmware):
        cpu = ",cpu-num=0" if board.arch == "aarch64" else ""   # M profile boots from its vectors
        return ["-device", f"loader,file={_option_value(firmware)}{cpu}"]
    return ["-kernel", str(firmware)]


def weights_args(board: Board, weights: str | Path) -> list[str]:
    weights = Path(weights)
    if is_hex_file(weights):
        return ["-device", f"loader,file={_option_value(weights)}"]
    return ["-device", (f"loader,file={_option_value(weights)},addr=0x{board.weights.origin:X},"
                       f"force-raw=on")]


def slots_args(board: Board, slots_file: str | Path) -> list[str]:
    """The A/B slot flash backed by a file ([emulate] slots_drive, docs/ota.md):
    QEMU writes every program and erase of the guest through to it."""
    drive = board.emulate.get("slots_drive")
    if board.slots is None or not isinstance(drive, str) or not drive:
        raise QemuError(f"board {board.name} has no A/B slots QEMU can keep in a file "
                        f"([slots] and [emulate] slots_drive)", path=board.path)
    return ["-drive", f"{drive},file={_option_value(Path(slots_file))}"]


def storage_args(storage: str | Path, settings: Sequence[str] = ()) -> list[str]:
    """The image file a paging sample reads through semihosting
    (ports/baremetal/semihosting_storage.c): the emulator's command line
    "firmware PATH SETTING...", each setting a word without spaces."""
    words = ["firmware", str(Path(storage).resolve()), *settings]
    for word in words[1:]:
        if not word or " " in word:
            raise QemuError(f"semihosting argument {word!r}: the firmware splits its command "
                            f"line at spaces (one word each, no spaces in the path)")
    return ["-semihosting-config",
            "enable=on,target=native," + ",".join(f"arg={_option_value(w)}" for w in words)]


def serial_spec(port: int | None) -> str:
    if port is None:
        return "stdio"
    return f"tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on"


def qemu_argv(board: Board, firmware: str | Path, weights: str | Path | None = None, *,
              port: int | None = None, qmp: Path | None = None,
              slots_file: str | Path | None = None, storage: str | Path | None = None,
              settings: Sequence[str] = ()) -> list[str]:
    """The QEMU command line. With `qmp`, QEMU starts paused (-S) with a QMP
    socket there, for the weights to be read back before the CPU runs. With
    `storage`, the image file (and `settings`) a paging sample reads."""
    emu = emulation(board)
    argv = [emu.binary, "-M", emu.machine]
    argv += ["-cpu", emu.cpu] if emu.cpu else []
    argv += ["-m", emu.memory] if emu.memory else []
    argv += ["-nographic", "-monitor", "none", "-serial", serial_spec(port), *NO_NETWORK]
    if not any(a.startswith("-semihosting") for a in emu.extra):
        argv += SEMIHOSTING
    argv += [*emu.extra, *firmware_args(board, firmware)]
    argv += weights_args(board, weights) if weights is not None else []
    argv += slots_args(board, slots_file) if slots_file is not None else []
    argv += storage_args(storage, settings) if storage is not None else []
    if qmp is not None:
        argv += ["-qmp", f"unix:{_option_value(qmp)},server=on,wait=off", "-S"]
    return argv


def expected_weights(board: Board, weights: str | Path) -> tuple[int, int, Piece | Path]:
    """(address, size, what to compare with) of the bytes the loader places."""
    weights = Path(weights)
    if is_hex_file(weights):
        lo, hi = hex_extent(weights, board.weights)
        return lo, hi - lo, weights
    size = weights.stat().st_size
    return board.weights.origin, size, Piece(board.weights.origin, size, weights.name,
                                             path=weights)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- QMP ----------------------------------------------------------------------

class _Qmp:
    """The few QMP commands needed: capabilities, pmemsave, cont."""

    def __init__(self, path: Path, deadline: float, alive: Callable[[], bool]) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        while True:
            try:
                self.sock.connect(str(path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline or not alive():
                    self.sock.close()
                    raise QemuError(f"QMP socket {path} never opened") from None
                time.sleep(0.02)
        self.sock.settimeout(max(deadline - time.monotonic(), 1.0))
        self.file = self.sock.makefile("rwb")
        self._reply()                       # the greeting
        self.command("qmp_capabilities")

    def _reply(self) -> dict[str, Any]:
        while True:
            line = self.file.readline()
            if not line:
                raise QemuError("QEMU closed its QMP socket")
            msg = json.loads(line)
            if "event" not in msg:
                return msg

    def command(self, name: str, **arguments: Any) -> Any:
        self.file.write(json.dumps({"execute": name, "arguments": arguments}).encode() + b"\n")
        self.file.flush()
        reply = self._reply()
        if "error" in reply:
            raise QemuError(f"QMP {name} failed: {reply['error'].get('desc', reply['error'])}")
        return reply.get("return")

    def resume(self) -> None:
        """Send `cont`. A firmware that finishes at once makes QEMU exit before
        the reply arrives: a reset or closed socket then means it ran."""
        try:
            self.command("cont")
        except (ConnectionResetError, BrokenPipeError):
            pass
        except QemuError as exc:
            if "closed its QMP socket" not in str(exc):
                raise

    def close(self) -> None:
        self.file.close()
        self.sock.close()


# ---- sessions -----------------------------------------------------------------

_LIVE: set[QemuSession] = set()
PR_SET_PDEATHSIG = 1          # <linux/prctl.h>
try:
    _LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
except OSError:
    _LIBC = None


# Signals that end a run. They are held back while QEMU is being forked: a
# Python handler that raises (colibri-test's SystemExit) would otherwise run
# inside an at-fork callback, where the exception is printed and dropped.
ENDING_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def _die_with_parent(parent: int) -> None:
    """In the forked child, before exec: the kernel sends SIGKILL to QEMU when
    its parent (this Python process; strictly, the thread that started it)
    ends, however it ends, kill -9 included. If the parent is already gone,
    do not start at all. The ending signals, held back by the parent around
    the fork, are let through again for QEMU."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDING_SIGNALS)
    if os.getppid() != parent:
        os._exit(1)


def _spawn(argv: list[str], capture: bool | str) -> subprocess.Popen:
    held = threading.current_thread() is threading.main_thread()
    if held:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, ENDING_SIGNALS)
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE if capture else None,
                                stderr=subprocess.PIPE,
                                preexec_fn=functools.partial(_die_with_parent, os.getpid()))
    finally:
        if held:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


@atexit.register
def _kill_all() -> None:
    for session in list(_LIVE):
        session.close()


class QemuSession:
    """A running QEMU. `port` is the serial TCP port (None: serial on stdio,
    collected in `output`). Use as a context manager; close() kills QEMU."""

    def __init__(self, board: Board, argv: list[str], *, port: int | None, timeout: float,
                 workdir: Path, check: tuple[int, int, Piece | Path] | None,
                 capture: bool | str, firmware: Path | None = None) -> None:
        self.board, self.argv, self.port, self.timeout = board, argv, port, timeout
        self.firmware = firmware
        self._tee = capture == "tee"
        self.workdir, self._check = workdir, check
        self.output = bytearray()
        self._stderr = bytearray()
        self.timed_out = False
        self._started = check is None
        self._deadline = time.monotonic() + timeout
        self.process = _spawn(argv, capture)
        _LIVE.add(self)
        self._threads = [threading.Thread(target=self._drain, args=(s, buf, echo), daemon=True)
                         for s, buf, echo in ((self.process.stdout, self.output, self._tee),
                                              (self.process.stderr, self._stderr, False))
                         if s is not None]
        for t in self._threads:
            t.start()
        self._watchdog = threading.Timer(timeout, self._expire)
        self._watchdog.daemon = True
        self._watchdog.start()

    @staticmethod
    def _drain(stream, buffer: bytearray, echo: bool = False) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            buffer += chunk
            if echo:
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()

    def explain(self, status: int) -> str | None:
        """What a fault exit of the firmware means, in words (board_check.explain_exit)."""
        from .board_check import explain_exit

        return explain_exit(self.board, status, self.output.decode(errors="replace"),
                            self.stderr, self.firmware)

    def _expire(self) -> None:
        if self.process.poll() is None:
            self.timed_out = True
            self.process.kill()

    @property
    def stderr(self) -> str:
        return self._stderr.decode(errors="replace")

    @property
    def url(self) -> str:
        """The serial port as a pyserial URL."""
        if self.port is None:
            raise QemuError("this session has its serial port on stdio, not TCP")
        return f"socket://127.0.0.1:{self.port}"

    def _failure(self, what: str) -> QemuError:
        self.close()
        detail = "\n".join(line for line in self.stderr.splitlines()
                           if "terminating on signal" not in line).strip()
        return QemuError(f"{what} ({' '.join(self.argv)})" + (f":\n{detail}" if detail else ""))

    def wait_listening(self) -> None:
        """Block until QEMU listens on the serial port (it waits for one client)."""
        end = min(self._deadline, time.monotonic() + LISTEN_TIMEOUT)
        while b"waiting for connection" not in self._stderr:
            if self.process.poll() is not None:
                raise self._failure("QEMU exited before listening on its serial port")
            if time.monotonic() > end:
                raise self._failure("QEMU did not start listening on its serial port")
            time.sleep(0.01)

    def start(self) -> None:
        """Read the weights back from emulated memory, compare them, and let the
        CPU run. Called by connect()/open_serial() (TCP) or by launch() (stdio)."""
        if self._started:
            return
        address, size, expected = self._check
        try:
            qmp = _Qmp(self.workdir / "qmp.sock", self._deadline,
                       lambda: self.process.poll() is None)
            try:
                dump = self.workdir / "weights.readback"
                qmp.command("pmemsave", val=address, size=size, filename=str(dump))
                try:
                    compare_dump(dump, address, expected)
                except ColibriError as exc:
                    raise self._failure(
                        f"the weights did not arrive in {self.board.name}'s emulated memory at "
                        f"{span(address, address + size)} ({exc.message}); is the weight region "
                        f"inside the machine's RAM ([emulate] memory)?") from None
                finally:
                    dump.unlink(missing_ok=True)
                qmp.resume()
            finally:
                qmp.close()
        except (QemuError, OSError, ValueError) as exc:
            # With a TCP serial port, QEMU's monitor stays silent until a client
            # connects: a timeout (ours, or the session's) then means no client.
            if self.port is not None and (isinstance(exc, TimeoutError) or self.timed_out):
                raise self._failure(self._no_client()) from None
            if isinstance(exc, QemuError):
                self.close()
                raise
            raise self._failure(f"QMP conversation failed: {exc}") from None
        self._started = True

    def _no_client(self) -> str:
        """QEMU with a TCP serial port waits for one client before it runs; its
        monitor does not answer until then."""
        return (f"no client connected to the serial port 127.0.0.1:{self.port} within "
                f"{self.timeout:g} s (QEMU does not start the CPU until one does): connect one "
                f"(colibri-test run --port socket://127.0.0.1:{self.port} suite.json), or let "
                f"colibri-test boot the board itself: colibri-test run --board {self.board.name} "
                "--firmware FW --weights W suite.json")

    def connect(self, timeout: float = 10.0) -> socket.socket:
        """A TCP connection to the serial port (QEMU accepts one client)."""
        if self.port is None:
            raise QemuError("this session has its serial port on stdio, not TCP")
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.start()
        return sock

    def open_serial(self, **kwargs: Any):
        """The serial port as a pyserial object (serial_for_url)."""
        import serial

        port = serial.serial_for_url(self.url, **kwargs)
        self.start()
        return port

    def wait(self, timeout: float | None = None) -> int:
        """QEMU's exit status (the firmware's, through semihosting). Raises
        QemuError if the session's timeout (or `timeout`) passes first."""
        limit = self._deadline - time.monotonic()
        limit = limit if timeout is None else min(limit, timeout)
        try:
            code = self.process.wait(timeout=max(limit, 0) + 1.0)
        except subprocess.TimeoutExpired:
            self.timed_out = True
            code = None
        if self.timed_out or code is None:
            raise self._failure(f"QEMU did not finish within {self.timeout:g} s and was killed")
        for t in self._threads:
            t.join(timeout=2.0)
        return code

    def close(self) -> None:
        self._watchdog.cancel()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for t in self._threads:
            t.join(timeout=2.0)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        _LIVE.discard(self)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def launch(board: Board | str, firmware: str | Path, weights: str | Path | None = None, *,
           tcp: bool = True, port: int | None = None, timeout: float = 60.0,
           verify: bool = True, capture: bool | str = True,
           check: bool = True, slots_file: str | Path | None = None,
           storage: str | Path | None = None, settings: Sequence[str] = ()) -> QemuSession:
    """Start QEMU for the board. With tcp (default) the serial port is a TCP
    server on `port` (a free one if None) that waits for its client: connect
    with session.connect() or session.open_serial(). Without tcp the serial
    port is stdio, collected in session.output (capture) or left on this
    process's stdout ("tee": both). With verify and weights, the weights are
    read back from emulated memory before the CPU starts. With check, a
    firmware built for another board is refused (board_check). slots_file: the
    file that holds the board's A/B slot flash (docs/ota.md). storage: the
    image file a paging sample reads through semihosting, with its settings
    (samples/baremetal/paged_moe)."""
    board = board if isinstance(board, Board) else load(board)
    emu = emulation(board)
    require_binary(emu.binary)
    check_weight_region(board)
    for path in (firmware, weights, storage):
        if path is not None and not Path(path).is_file():
            raise QemuError("no such file", path=path)
    if check:
        from .board_check import check_firmware

        check_firmware(board, firmware)
    readback = expected_weights(board, weights) if (verify and weights is not None) else None
    workdir = Path(tempfile.mkdtemp(prefix="colibri-qemu-"))
    port = (port or free_port()) if tcp else None
    argv = qemu_argv(board, firmware, weights, port=port,
                     qmp=workdir / "qmp.sock" if readback else None,
                     slots_file=slots_file, storage=storage, settings=settings)
    session = QemuSession(board, argv, port=port, timeout=timeout, workdir=workdir,
                          check=readback, capture=capture, firmware=Path(firmware))
    try:
        if tcp:
            session.wait_listening()
        else:
            session.start()
    except BaseException:
        session.close()
        raise
    return session


@dataclass(frozen=True)
class QemuRun:
    returncode: int
    output: bytes
    stderr: str
    argv: list[str]
    fault: str | None = None       # a fault exit explained in words (board_check)


def run(board: Board | str, firmware: str | Path, weights: str | Path | None = None, *,
        timeout: float = 60.0, verify: bool = True, check: bool = True) -> QemuRun:
    """Boot with the serial port on stdio, wait for the firmware to exit, and
    return its status, console output and, for a fault exit, what happened."""
    with launch(board, firmware, weights, tcp=False, timeout=timeout, verify=verify,
                check=check) as s:
        code = s.wait()
        return QemuRun(code, bytes(s.output), s.stderr, s.argv, s.explain(code))
