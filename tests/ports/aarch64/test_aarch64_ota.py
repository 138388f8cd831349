"""A/B weight slots on a QEMU board (qemu_virt_a72, docs/ota.md): the
ota_runner firmware keeps its slots in virt's CFI flash, which QEMU backs by
a file; colibri_tools.board.ota (what colibri-flash --slot auto runs) sends a new
image over the serial protocol. Refused images leave the record alone; QEMU
killed at every step of an update (after each acknowledged step, and while
the device programs the next one) and during the first boot of the new image
always comes back with the old or the new image, verified, never a mix."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import threading

import pytest
from aarch64_helpers import REPO, Firmware, make
from colibri_tools.board import ota, qemu
from colibri_tools.board.flash import main as flash_main
from colibri_tools.protocol import DeviceError
from colibri_tools.protocol.client import SerialClient
from colibri_tools.protocol.frames import ErrorCode, Msg, SerialProtocolError
from cryptography.hazmat.primitives import serialization
from ota_images import KEY, write_update_images

BOOT_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def ota_world(a72_board, cross_tools, tmp_path_factory):
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    root = tmp_path_factory.mktemp("ota")
    model, _ = build_model("mixtral", seed=5, hidden_size=16, intermediate_size=8,
                           num_local_experts=4, num_experts_per_tok=2, vocab_size=64, head_dim=4)
    save_checkpoint(model, root / "hf")
    convert(root / "hf", root / "out", context=32, alignment=256, progress=False)
    pub = root / "key.pub"
    pub.write_bytes(KEY.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    done = make("firmware", f"BOARD={a72_board.name}", "APP=ota_runner",
                f"MODEL_DIR={root / 'out'}", f"BUILD={root / 'build'}", f"TRUSTED_KEY={pub}")
    assert done.returncode == 0, done.stdout + done.stderr
    firmware = Firmware(a72_board, root / "build" / "fw" / a72_board.name / "ota_runner")
    images = write_update_images((root / "out" / "model.bin").read_bytes(), root / "images")
    assert make("host").returncode == 0
    expect = {}
    for name in ("old", "new"):
        fp = int.from_bytes(images[name].read_bytes()[24:28], "little")
        run = subprocess.run([str(REPO / "build" / "host" / "colibri-run"), str(images[name]),
                              "--ids", "1,2,3", "--gen", "4"], capture_output=True, text=True,
                             check=True)
        expect[fp] = (name, [int(t) for t in run.stdout.split()])
    return a72_board, firmware, images, expect, root


class Device:
    """One boot of the board on a slot flash file."""

    def __init__(self, board, firmware, flash: pathlib.Path, timeout: float = BOOT_TIMEOUT):
        self.session = qemu.launch(board, firmware.elf, None, timeout=timeout,
                                   slots_file=flash)
        self.dev = SerialClient.from_port(self.session.open_serial(timeout=10), self.session.url,
                                          timeout=30)
        self.info = self.dev.connect(timeout=60)

    def kill(self) -> None:
        self.session.process.kill()          # the power cut: nothing more reaches the file

    def close(self) -> None:
        self.dev.close()
        self.session.close()


def booted(world, flash) -> tuple[str, int]:
    """Boot, check the running image is OLD or NEW exactly (fingerprint,
    verified at boot, greedy tokens equal colibri-run's on that image)."""
    board, firmware, _, expect, _ = world
    d = Device(board, firmware, flash)
    try:
        state = d.dev.slot_state()
        assert d.info.init_status == 0, (d.info, list(d.dev.text_log))
        name, tokens = expect[d.info.fingerprint]          # KeyError: neither image
        assert list(d.dev.generate([1, 2, 3], 4).tokens) == tokens
        assert state.fingerprint[state.running] == d.info.fingerprint
        return name, state.running
    finally:
        d.close()


def factory(world) -> pathlib.Path:
    """A flash whose slot A holds OLD, confirmed."""
    board, firmware, images, _, root = world
    flash = root / "factory.img"
    if not flash.exists():
        ota.erased_flash(board, root / "erased.img")
        shutil.copy(root / "erased.img", flash)
        d = Device(board, firmware, flash)
        ota.update(d.dev, images["old"].read_bytes())
        d.close()
        assert booted(world, flash) == ("old", 0)
    return flash


def test_updates_and_refusals(ota_world, tmp_path):
    board, firmware, images, _, _ = ota_world
    flash = tmp_path / "flash.img"
    shutil.copy(factory(ota_world), flash)
    d = Device(board, firmware, flash)
    try:
        assert d.dev.slot_state().signed_only == 1
        for request, payload in ((Msg.SLOT_BEGIN, bytes(7)), (Msg.SLOT_FINISH, b"\2\0\0\0"),
                                 (Msg.SLOT_WRITE, bytes(8)), (Msg.SLOT_STATUS, b"x")):
            with pytest.raises(DeviceError) as caught:
                d.dev.transact(request, payload)
            assert caught.value.code == ErrorCode.BAD_PAYLOAD, request
        assert d.dev.slot_begin(1 << 40).status == 28          # larger than a slot
        assert d.dev.slot_write(4, b"late").status == 29       # out of order
        for name, status in (("other", 25), ("unsigned", 22)):
            with pytest.raises(ota.UpdateError) as caught:
                ota.update(d.dev, images[name].read_bytes())
            assert caught.value.status == status, name
    finally:
        d.close()
    # the same update through the command line: colibri-flash --slot auto
    # keeps the board's flash in WORK/slots.img, sends, reboots, reports
    work = tmp_path / "work"
    work.mkdir()
    shutil.move(flash, work / "slots.img")
    pub = ota_world[4] / "key.pub"
    assert flash_main(["--board", board.name, "--slot", "auto", "--weights", str(images["new"]),
                       "--firmware", str(firmware.elf), "--trusted-key", str(pub),
                       "--work-dir", str(work), "--timeout", "120"]) == 0
    shutil.move(work / "slots.img", flash)
    assert booted(ota_world, flash) == ("new", 1)       # tried, passed, confirmed
    d = Device(board, firmware, flash)
    try:
        state = d.dev.slot_state()
        assert state.state == (3, 3) and state.running == 1
        with pytest.raises(ota.UpdateError) as caught:   # version 1 after version 2
            ota.update(d.dev, images["old"].read_bytes())
        assert caught.value.status == 30
    finally:
        d.close()
    assert booted(ota_world, flash) == ("new", 1)


def cut_update(world, flash, k: int, mid_step: bool) -> None:
    """Run the update to NEW and kill QEMU after step k is acknowledged, or
    30 ms into step k + 1 (the device is programming it then)."""
    board, firmware, images, _, _ = world
    d = Device(board, firmware, flash)

    def progress(step, total, what):
        if step == k:
            if mid_step:
                threading.Timer(0.03, d.kill).start()
            else:
                d.kill()

    try:
        ota.update(d.dev, images["new"].read_bytes(), progress=progress)
    except (SerialProtocolError, OSError):
        pass
    finally:
        d.close()


def test_power_cut_at_every_update_step(ota_world, tmp_path, record_property):
    board, firmware, images, _, _ = ota_world
    flash = tmp_path / "flash.img"
    total = ota.steps_for(images["new"].stat().st_size)
    full = os.environ.get("COLIBRI_OTA_QEMU_FULL") == "1"
    seen, cuts = {"old": 0, "new": 0}, 0
    for k in range(1, total + 1):
        for mid_step in (False, True):
            if mid_step and (k == total or (not full and k % 3)):
                continue
            shutil.copy(factory(ota_world), flash)
            cut_update(ota_world, flash, k, mid_step)
            name, _ = booted(ota_world, flash)
            assert name == ("new" if k == total else "old") or mid_step, (k, name)
            seen[name] += 1
            cuts += 1
    # the first boot of NEW (trial, then confirm): power cut at a few moments
    for delay in (0.0, 0.05, 0.15, 0.4) if full else (0.05, 0.4):
        shutil.copy(factory(ota_world), flash)
        d = Device(board, firmware, flash)
        ota.update(d.dev, images["new"].read_bytes())
        d.close()
        s = qemu.launch(board, firmware.elf, None, timeout=BOOT_TIMEOUT, slots_file=flash)
        threading.Event().wait(delay)
        s.process.kill()
        s.close()
        name, _ = booted(ota_world, flash)
        seen[name] += 1
        cuts += 1
        if full:
            assert booted(ota_world, flash)[0] == name      # and it stays
    record_property("qemu_ota_cuts", cuts)
    print(f"qemu_virt_a72 OTA: {cuts} power cuts ({total} update steps): booted old "
          f"{seen['old']}, new {seen['new']}")
    assert seen["old"] > 0 and seen["new"] > 0


def _hostile_variants(image: bytes, plain: int, samples: int) -> dict[str, bytes]:
    """Byte flips spread over the header, the tables, the data and the
    signature block, and truncations at sampled lengths, of one signed image
    (issue 25: the serial SLOT_* path, not only the Linux store)."""
    flips = sorted({0, 8, 16, 24, 60, 255, 256, plain - 1, plain, plain + 16, plain + 56,
                    len(image) - 1} | set(range(3, len(image), max(1, len(image) // samples))))
    variants = {}
    for at in flips:
        data = bytearray(image)
        data[at] ^= 1 << (at % 8)
        variants[f"flip {at}"] = bytes(data)
    cuts = set(range(17, len(image), max(1, len(image) // (samples // 3 + 1))))
    for n in sorted({1, 256, 4096, plain - 1, plain, plain + 127, len(image) - 1} | cuts):
        variants[f"first {n} bytes"] = image[:n]
    variants["64 bytes past the block"] = image + bytes(64)
    return variants


def test_hostile_updates_over_serial(ota_world, tmp_path, record_property):
    """Every flipped byte and every truncation of the signed NEW, sent over
    SLOT_BEGIN/WRITE/FINISH to the bare-metal ota_runner, is refused by the
    device with a status; the target stays EMPTY and A (OLD) keeps running;
    bytes past the signature block are status 36 (the update must verify
    exactly what it wrote). Then NEW itself installs and boots. The suite
    sends about 35 (about 1.5 s each here); COLIBRI_OTA_QEMU_FULL=1 about 300."""
    board, firmware, images, _, _ = ota_world
    flash = tmp_path / "flash.img"
    shutil.copy(factory(ota_world), flash)
    new = images["new"].read_bytes()
    full = os.environ.get("COLIBRI_OTA_QEMU_FULL") == "1"
    variants = _hostile_variants(new, int.from_bytes(new[16:24], "little"), 200 if full else 12)
    statuses: dict[int, int] = {}
    d = Device(board, firmware, flash, timeout=BOOT_TIMEOUT + 2.0 * len(variants))
    try:
        for what, data in variants.items():
            with pytest.raises(ota.UpdateError) as caught:
                ota.update(d.dev, data)
            statuses[caught.value.status] = statuses.get(caught.value.status, 0) + 1
            if what == "64 bytes past the block":
                assert caught.value.status == 36
            state = d.dev.slot_state()
            assert state.running == 0 and state.state == (3, 0), (what, state)
        ota.update(d.dev, new)
    finally:
        d.close()
    assert booted(ota_world, flash) == ("new", 1)
    record_property("serial_hostile_updates", len(variants))
    print(f"qemu_virt_a72 serial SLOT_*: {len(variants)} hostile updates refused, statuses "
          f"{dict(sorted(statuses.items()))}")
