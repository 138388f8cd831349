"""Helpers for the serial protocol tests (imported by conftest.py and tests)."""
from __future__ import annotations

import pathlib
import select
import shutil
import subprocess
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
# serial.mk is guarded against double inclusion, so this works whether or not
# the Makefile includes it already.
MAKE = ["make", "-s", "-f", "Makefile", "-f", "ports/serial/serial.mk"]
SANITIZER_MARKS = ("AddressSanitizer", "runtime error:", "LeakSanitizer")


def make(*targets: str) -> None:
    done = subprocess.run([*MAKE, *targets], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


class Runner:
    """A serial_runner process serving one model image on a TCP port."""

    def __init__(self, binary: pathlib.Path, image: pathlib.Path, log: pathlib.Path,
                 *args: str) -> None:
        self.log = log
        self._err = open(log, "w")
        self.proc = subprocess.Popen([str(binary), str(image), "--tcp", "0", *args],
                                     stdout=subprocess.PIPE, stderr=self._err, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 20)
        line = self.proc.stdout.readline() if ready else ""
        assert line.startswith("listening on 127.0.0.1:"), f"runner said {line!r}: {self.stderr()}"
        self.port = int(line.rsplit(":", 1)[1])
        self.url = f"socket://127.0.0.1:{self.port}"

    def stderr(self) -> str:
        self._err.flush()
        return self.log.read_text()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> str:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()
        return self.log.read_text()


def wait_until(predicate, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def have(tool: str) -> bool:
    return shutil.which(tool) is not None
