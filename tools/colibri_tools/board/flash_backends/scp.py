"""The scp backend, for boards that run the Linux port (Raspberry Pi, Jetson):
the weights are a file that colibri-run maps at run time, so "flashing" is a
copy over SSH to [flash] host:path, checked with sha256sum on the board."""

from __future__ import annotations

import hashlib
import re
import shlex
import subprocess

from ..hex_image import is_hex_file
from .common import FlashError, FlashRequest, Step, flash_key

HOST = re.compile(r"([A-Za-z0-9._-]+@)?[A-Za-z0-9.:_\[\]-]+")


def _target(req: FlashRequest) -> tuple[str, str]:
    """(user@address, folder): --host, else [flash] host; [flash] path."""
    board = req.board
    host = req.host or flash_key(board, "host", str)
    path = flash_key(board, "path", str)
    if not host:
        raise FlashError(f"board {board.name} is reached over SSH: give --host user@address "
                         f"(the board file fixes no host)", path=board.path)
    if not HOST.fullmatch(host) or host.startswith("-"):
        raise FlashError(f"--host {host!r} is not user@address")
    if not path:
        raise FlashError(f"board {board.name}: [flash] method scp needs 'path' (a folder on the "
                         f"board)", path=board.path)
    return host, path


def _sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def plan(req: FlashRequest) -> list[Step]:
    host, folder = _target(req)
    if req.weights is not None and is_hex_file(req.weights):
        raise FlashError(f"board {req.board.name} runs the Linux port, which maps model.bin at "
                         f"run time: give the model.bin, not a HEX image")
    files = [str(p) for p in (req.weights, req.firmware) if p is not None]
    steps = [Step(("ssh", host, f"mkdir -p {shlex.quote(folder)}"), f"create {folder} on {host}",
                  tool="ssh"),
             Step(("scp", *files, f"{host}:{folder}/"), f"copy {len(files)} file(s) to {host}",
                  tool="scp")]
    if req.weights is not None and req.verify:
        remote = f"{folder.rstrip('/')}/{req.weights.name}"
        argv = ("ssh", host, f"sha256sum {shlex.quote(remote)}")

        def check() -> int:
            done = subprocess.run(argv, check=False, capture_output=True, text=True)
            theirs = done.stdout.split()[0] if done.returncode == 0 and done.stdout else ""
            if theirs != _sha256(req.weights):
                raise FlashError(f"{host}:{remote} differs from {req.weights} "
                                 f"(sha256 {theirs or 'unavailable: ' + done.stderr.strip()})")
            print(f"{host}:{remote}: sha256 matches")
            return 0

        steps.append(Step(argv, "compare the copy's SHA-256 with the model", tool="ssh",
                          action=check))
    return steps
