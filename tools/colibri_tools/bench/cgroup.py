"""A command run inside a memory cgroup of a given size, the page cache it
causes charged to it (how colibri-bench --budgets and the budget tests hold a
run to "a device with this much memory"): cgroup v1 (memory.limit_in_bytes)
or v2 (memory.max), as root; the page cache dropped first so that nothing the
run reads is already in memory. Where that cannot be done, `unavailable()`
says why and nothing runs.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import time

from ..errors import ColibriError

V1 = pathlib.Path("/sys/fs/cgroup/memory")
V2 = pathlib.Path("/sys/fs/cgroup")


class CgroupError(ColibriError):
    """No memory cgroup can be made here, or the run could not be placed in one."""


@dataclasses.dataclass
class LimitedRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    limit_bytes: int
    peak_bytes: int    # the cgroup's most memory in use (page cache included)
    oom_kills: int     # processes the kernel killed for the limit
    disk_read_bytes: int  # read from block devices meanwhile (the whole machine)


def _version() -> int:
    if (V1 / "memory.limit_in_bytes").exists():
        return 1
    controllers = V2 / "cgroup.controllers"
    if controllers.exists() and "memory" in controllers.read_text().split():
        return 2
    return 0


def unavailable() -> str | None:
    """Why a memory-limited run cannot be made here, or None."""
    if os.geteuid() != 0:
        return "memory cgroups need root (run as root to hold a run to a memory budget)"
    if _version() == 0:
        return ("no memory cgroup controller (neither v1 /sys/fs/cgroup/memory nor v2 "
                "memory in /sys/fs/cgroup/cgroup.controllers)")
    return None


def _disk_read_bytes() -> int:
    """Sectors read by every whole disk (not partitions), in bytes."""
    total = 0
    for line in pathlib.Path("/proc/diskstats").read_text().splitlines():
        f = line.split()
        name = f[2]
        if pathlib.Path(f"/sys/block/{name}").exists() and not name.startswith(("loop", "ram")):
            total += int(f[5]) * 512
    return total


def _make(name: str, limit: int) -> pathlib.Path:
    path = (V1 if _version() == 1 else V2) / name
    if path.exists():
        path.rmdir()
    path.mkdir()
    if _version() == 1:
        (path / "memory.limit_in_bytes").write_text(str(limit))
        swap = path / "memory.memsw.limit_in_bytes"
        if swap.exists():
            swap.write_text(str(limit))
    else:
        (path / "memory.max").write_text(str(limit))
        (path / "memory.swap.max").write_text("0")
    return path


def _usage(path: pathlib.Path) -> tuple[int, int]:
    """(peak bytes, OOM kills) of the cgroup."""
    if _version() == 1:
        peak = int((path / "memory.max_usage_in_bytes").read_text())
        events = (path / "memory.oom_control").read_text()
    else:
        peak_file = path / "memory.peak"
        peak = int(peak_file.read_text()) if peak_file.exists() else -1
        events = (path / "memory.events").read_text()
    kills = [int(line.split()[1]) for line in events.splitlines() if line.startswith("oom_kill ")]
    return peak, kills[0] if kills else 0


def drop_caches() -> None:
    os.sync()
    pathlib.Path("/proc/sys/vm/drop_caches").write_text("3\n")


def run_limited(cmd: list[str], limit_bytes: int, *, timeout: float = 3600,
                name: str = "colibri-budget") -> LimitedRun:
    """Run cmd in a fresh memory cgroup of limit_bytes, caches dropped first."""
    why = unavailable()
    if why:
        raise CgroupError(why)
    path = _make(f"{name}-{os.getpid()}", limit_bytes)
    procs = str(path / "cgroup.procs")

    def enter() -> None:  # in the child, before exec: its memory is the cgroup's from here
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    try:
        drop_caches()
        disk0, start = _disk_read_bytes(), time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              preexec_fn=enter)
        seconds = time.perf_counter() - start
        peak, kills = _usage(path)
        return LimitedRun(done.returncode, done.stdout, done.stderr, seconds, limit_bytes, peak,
                          kills, _disk_read_bytes() - disk0)
    finally:
        for _ in range(50):  # the cgroup empties once the child is reaped
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)
