"""A/B weight slots on Zephyr (docs/ota.md, docs/zephyr.md): serial_runner
built for native_sim with CONFIG_COLIBRI_SLOTS (-DFILE_SUFFIX=slots) keeps
its slots in a devicetree partition of Zephyr's flash simulator, which
keeps the flash in a file (--flash=FILE), written through the real flash
driver. colibri_tools.board.ota (what colibri-flash --slot auto runs) sends
images over the serial protocol on the native_sim UART's pseudo-terminal.

An update is written, verified and flipped; the next boot tries the new
image and confirms it; refused images leave the record alone; an image that
verifies but fails its first run is rejected and the old one comes back.
Power cuts: with CONFIG_COLIBRI_NATIVE_SIM_POWER_CUT the executable kills
itself (SIGKILL) at a chosen flash step (every erase of a sector and every
program, numbered), before the step or after half of a program; after each
cut the next power-on must run a verified image, and exactly the one the
A/B rules say. The suite samples the steps; COLIBRI_OTA_ZEPHYR_FULL=1 cuts
at every one. The same configuration also builds for a board with a real
flash driver (STM32H747I-DISCO's internal flash, 32-byte flash words)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from colibri_tools.board import ota
from colibri_tools.board.flash import main as flash_main
from colibri_tools.errors import ColibriError
from colibri_tools.image import signing
from colibri_tools.protocol.client import SerialClient
from cryptography.hazmat.primitives import serialization
from ota_images import KEY, write_update_images
from zephyr_helpers import (
    BUILD_ROOT,
    H747,
    NATIVE_SIM,
    REPO,
    Build,
    Process,
    board_env,
    missing_for_board,
    west_build,
)

APP = "samples/zephyr/serial_runner"
PROMPT = [1, 2, 3]
STEP_LINE = re.compile(r"^colibri flash step (\d+): (erase|program) 0x([0-9a-f]+) \+(\d+)$", re.M)


def poisoned(plain: bytes) -> bytes:
    """The image with every float32 tensor NaN (CRCs and fingerprint made
    right): it verifies, but its first run gives NaN logits."""
    img = bytearray(plain)
    table, n = struct.unpack_from("<QI", img, 48)
    for i in range(n):
        entry = table + 64 * i
        offset, size = struct.unpack_from("<QQ", img, entry + 32)
        img[offset:offset + size] = b"\x00\x00\xc0\x7f" * (size // 4)
        struct.pack_into("<I", img, entry + 28, zlib.crc32(bytes(img[offset:offset + size])))
    end = table + 64 * n
    struct.pack_into("<I", img, 24, zlib.crc32(bytes(img[:24]) + bytes(4) + bytes(img[28:end])))
    return bytes(img)


@dataclass
class World:
    build: Build
    images: dict[str, Path]
    expect: dict[int, tuple[str, list[int]]]   # fingerprint -> (name, greedy tokens)
    root: Path
    factory_flash: Path | None = None


def trusted_key() -> Path:
    """The tests' public key as the PEM file a build names."""
    key = BUILD_ROOT / "slots" / "key.pub"
    key.parent.mkdir(parents=True, exist_ok=True)
    pem = KEY.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    if not key.exists() or key.read_bytes() != pem:
        key.write_bytes(pem)
    return key


@pytest.fixture(scope="module")
def world(zephyr, zephyr_model, colibri_run, tmp_path_factory) -> World:
    root = tmp_path_factory.mktemp("zephyr_slots")
    build = west_build(zephyr, APP, NATIVE_SIM, zephyr_model,
                       directory=BUILD_ROOT / "serial_runner-slots-native_sim",
                       extra=("-DFILE_SUFFIX=slots", "-DCONFIG_COLIBRI_NATIVE_SIM_POWER_CUT=y",
                              f"-DCOLIBRI_TRUSTED_KEY={trusted_key()}"))
    plain = (zephyr_model / "model.bin").read_bytes()
    images = write_update_images(plain, root / "images")
    images["poisoned"] = root / "images" / "poisoned.bin"
    images["poisoned"].write_bytes(signing.sign_image(poisoned(plain), KEY, image_version=3,
                                                      block_log2=12))
    expect = {}
    for name in ("old", "new"):
        fp = int.from_bytes(images[name].read_bytes()[24:28], "little")
        run = subprocess.run([str(colibri_run), str(images[name]), "--ids",
                              ",".join(map(str, PROMPT)), "--gen", "4"], capture_output=True,
                             text=True, check=True, timeout=60)
        expect[fp] = (name, [int(t) for t in run.stdout.split()])
    assert len(expect) == 2
    return World(build, images, expect, root)


class Device:
    """One power-on of the native_sim board on a flash file."""

    def __init__(self, world: World, flash: Path, *options: str, connect: bool = True):
        wait = ["--wait_uart"] if connect else []       # hold UART output for the client
        self.proc = Process([str(world.build.exe), f"--flash={flash}", *wait, *options])
        self.dev = self.info = self.pty = None
        if connect:
            out = self.proc.read_until(r"connected to pseudotty: (/dev/pts/\d+)", 30)
            self.pty = re.search(r"connected to pseudotty: (/dev/pts/\d+)", out).group(1)
            self.dev = SerialClient.open(self.pty, timeout=30)
            self.info = self.dev.connect(timeout=30)

    def hand_over(self) -> str:
        """Close this side of the UART for another client; its port."""
        self.dev.close()
        self.dev = None
        return self.pty

    def steps(self) -> list[tuple[int, str]]:
        """The flash steps traced so far: (number, erase|program)."""
        try:
            self.proc.read_until(r"\Z.", 0.2)     # collect what is there (never matches)
        except AssertionError:
            pass
        return [(int(m.group(1)), m.group(2)) for m in STEP_LINE.finditer(self.proc.output)]

    def close(self) -> None:
        if self.dev is not None:
            self.dev.close()
        self.proc.stop()

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def booted(world: World, flash: Path) -> tuple[str, int]:
    """Power on, and check the running image is OLD or NEW exactly: it
    verified at boot (INFO), its fingerprint is one of theirs, the record
    names it, and its greedy tokens are colibri-run's for that image."""
    with Device(world, flash) as d:
        assert d.info.init_status == 0, (d.info, list(d.dev.text_log))
        name, tokens = world.expect[d.info.fingerprint]          # KeyError: neither image
        assert list(d.dev.generate(PROMPT, 4).tokens) == tokens
        state = d.dev.slot_state()
        assert state.fingerprint[state.running] == d.info.fingerprint
        assert state.state[state.running] == 3                    # GOOD: confirmed
        return name, state.running


def factory(world: World) -> Path:
    """A flash whose slot A holds OLD, confirmed: a new device's first update
    (no record yet), then its first boot."""
    if world.factory_flash is None:
        flash = world.root / "factory.bin"
        with Device(world, flash) as d:
            assert d.info.init_status != 0                       # nothing to run yet
            assert d.dev.slot_state().state == (0, 0)
            assert any("no slot holds a bootable image" in t for t in d.dev.text_log)
            assert ota.update(d.dev, world.images["old"].read_bytes()).target == 0
        assert booted(world, flash) == ("old", 0)
        world.factory_flash = flash
    return world.factory_flash


def fresh(world: World, path: Path) -> Path:
    shutil.copyfile(factory(world), path)
    return path


def test_update_verify_flip_trial_and_revert(world, tmp_path, capsys):
    flash = fresh(world, tmp_path / "flash.bin")
    key = str(trusted_key())
    with Device(world, flash) as d:
        state = d.dev.slot_state()
        assert state.signed_only == 1 and state.running == 0
        assert state.slot_size == (1 << 20) // 2 - 4096            # the 1 MiB partition's rule
        for name, status in (("other", 25), ("unsigned", 22)):   # wrong key, no signature
            with pytest.raises(ota.UpdateError) as caught:
                ota.update(d.dev, world.images[name].read_bytes())
            assert caught.value.status == status, name
        assert d.dev.slot_state().state == (3, 0)                 # A still GOOD, B EMPTY
        # colibri-flash checks the signature before it sends a byte ...
        assert flash_main(["--slot", "auto", "--serial", d.pty, "--trusted-key", key,
                           "--weights", str(world.images["other"])]) == 1
        assert "the device would refuse it" in capsys.readouterr().err
        # ... and sends NEW to the device on its UART
        port = d.hand_over()
        assert flash_main(["--slot", "auto", "--serial", port, "--trusted-key", key,
                           "--weights", str(world.images["new"])]) == 0
        assert "slot B written and verified; reset the device" in capsys.readouterr().out
        d.dev = SerialClient.open(port, timeout=30)
        d.dev.connect(timeout=30)
        assert d.dev.slot_state().state == (3, 1)                 # B PENDING
    with Device(world, flash) as d:                               # the trial boot
        assert any("slot B: new image passed its first run, confirmed" in t
                   for t in d.dev.text_log), list(d.dev.text_log)
    assert booted(world, flash) == ("new", 1)
    with Device(world, flash) as d:
        assert d.dev.slot_state().state == (3, 3)
        with pytest.raises(ota.UpdateError) as caught:             # version 1 after 2
            ota.update(d.dev, world.images["old"].read_bytes())
        assert caught.value.status == 30
        # verifies (signature, hashes, CRCs) but its first run gives NaN logits
        assert ota.update(d.dev, world.images["poisoned"].read_bytes()).target == 0
    with Device(world, flash) as d:
        log = list(d.dev.text_log)
        assert any("slot A: new image failed its first run, rejected" in t for t in log), log
        assert any("slot B: running" in t for t in log), log
        assert d.dev.slot_state().state == (4, 3)                 # A BAD, B GOOD
    assert booted(world, flash) == ("new", 1)


def cut(world: World, flash: Path, step: int, torn: bool, *, update: bool) -> str:
    """Power on with a cut at flash step `step` (of the update to NEW when
    update, else of the boot itself); returns the device's last words."""
    options = [f"--colibri-power-cut={step}"] + (["--colibri-power-cut-torn"] if torn else [])
    d = Device(world, flash, *options, connect=update)
    try:
        if update:
            try:
                ota.update(d.dev, world.images["new"].read_bytes())
            except (ColibriError, OSError):
                pass
        d.proc.read_until(r"^colibri power cut at flash step \d+", 30)
        d.proc.proc.wait(timeout=10)
        return d.proc.output
    finally:
        d.close()


def update_steps(world: World, tmp_path: Path) -> tuple[list[tuple[int, str]],
                                                        list[tuple[int, str]]]:
    """The flash steps of an update from OLD to NEW, and of the trial boot
    that follows, traced by an uncut run."""
    flash = fresh(world, tmp_path / "trace.bin")
    with Device(world, flash) as d:
        ota.update(d.dev, world.images["new"].read_bytes())
        update = d.steps()
    with Device(world, flash) as d:
        boot = d.steps()
    return update, boot


def test_power_cut_at_flash_steps(world, tmp_path, record_property):
    update, boot = update_steps(world, tmp_path)
    size = world.images["new"].stat().st_size
    programs = [n for n, kind in update if kind == "program"]
    # the record (both copies: erase + program each), the slot's sectors, the
    # data, the record again
    assert len(programs) == 4 + -(-size // ota.CHUNK), update
    assert [kind for _, kind in boot] == ["erase", "program"] * 4, boot
    full = os.environ.get("COLIBRI_OTA_ZEPHYR_FULL") == "1"
    last = len(update)
    # sampled: every sixth step, every step of the first and last record writes
    points = [(n, False) for n in range(1, last + 1) if full or n % 6 == 1 or n <= 4
              or n > last - 4]
    points += [(n, True) for n in programs if full or n % 6 == 3 or n <= 4 or n > last - 4]
    flash = tmp_path / "flash.bin"
    seen = {"old": 0, "new": 0}
    for step, torn in sorted(points):
        fresh(world, flash)
        out = cut(world, flash, step, torn, update=True)
        assert f"colibri power cut at flash step {step}" in out, out[-2000:]
        name, _ = booted(world, flash)
        # the record flips when its first copy is programmed (step last - 2)
        assert name == ("old" if step <= last - 2 else "new"), (step, torn)
        seen[name] += 1
    # the trial boot of NEW: cut before the first copy says TRYING (steps 1,
    # 2): the next boot tries it again and confirms it; cut after that and
    # before the first copy says GOOD (3 .. 6): NEW never confirmed its first
    # run, so the next boot reverts to OLD; cut later (7, 8): NEW is confirmed
    boot_points = [(n, torn) for n, kind in boot for torn in (False, True)
                   if not torn or kind == "program"]
    for step, torn in boot_points:
        fresh(world, flash)
        with Device(world, flash) as d:
            ota.update(d.dev, world.images["new"].read_bytes())
        out = cut(world, flash, step, torn, update=False)
        assert f"colibri power cut at flash step {step}" in out, out[-2000:]
        name, running = booted(world, flash)
        assert (name, running) == (("new", 1) if step <= 2 or step >= 7 else ("old", 0)), \
            (step, torn)
        assert booted(world, flash)[0] == name               # and it stays
        seen[name] += 1
    # and killed from outside (SIGKILL to the process group), just after the
    # host saw step k of the update acknowledged: the device is then taking
    # the next request, at no step chosen by the firmware
    total = ota.steps_for(size)
    outside = (2, total // 2, total - 1)
    for k in outside:
        fresh(world, flash)
        d = Device(world, flash)

        def progress(step, _total, _what, d=d, k=k):
            if step == k:
                os.killpg(d.proc.proc.pid, signal.SIGKILL)

        try:
            with pytest.raises((ColibriError, OSError)):
                ota.update(d.dev, world.images["new"].read_bytes(), progress=progress)
        finally:
            d.close()
        assert booted(world, flash)[0] == "old", k
        seen["old"] += 1
    cuts = len(points) + len(boot_points) + len(outside)
    record_property("zephyr_ota_cuts", cuts)
    print(f"native_sim OTA: {cuts} power cuts ({len(update)} update steps + {len(boot)} boot "
          f"steps, {'all' if full else 'sampled'}, {len(outside)} kills from outside): booted old "
          f"{seen['old']}, new {seen['new']}")
    assert seen["old"] > 0 and seen["new"] > 0


def test_slots_build_for_stm32h747_internal_flash(zephyr, zephyr_model):
    """The soc-nv-flash path of the port (the partition read in place at its
    address, the STM32H7 flash driver, 32-byte program units, data cache
    kept coherent) compiles and links, and the firmware ends before the
    partition begins. Build only: QEMU has no STM32H7."""
    from colibri_tools.board.elf import read_elf

    reason = missing_for_board(zephyr, H747)
    if reason:
        pytest.skip(reason)
    build = west_build(zephyr, APP, H747, zephyr_model,
                       directory=BUILD_ROOT / "serial_runner-slots-h747",
                       extra=("-DFILE_SUFFIX=slots", f"-DCOLIBRI_TRUSTED_KEY={trusted_key()}"))
    dts = (build.zephyr_dir / "zephyr.dts").read_text()
    m = re.search(r"colibri_slots: partition@20000 \{[^}]*reg = < 0x20000 0xc0000 >;", dts)
    assert m, "the slots partition is not in the board's devicetree"
    elf = read_elf(build.elf)
    names = {name for _, _, name in elf.symbols}
    assert {"colibri_zephyr_slots", "colibri_runner_boot_slots", "colibri_ed25519_verify",
            "flash_stm32_block_erase_loop"} <= names        # the internal flash's driver
    flash_end = max(s.paddr + s.filesz for s in elf.segments if s.filesz > 0)
    assert 0x08000000 < flash_end <= 0x08020000, hex(flash_end)
    print(f"stm32h747 serial_runner with slots: {build.memory()}")


def test_slots_without_a_partition_stop_the_configuration(zephyr, zephyr_model, tmp_path):
    """CONFIG_COLIBRI_SLOTS on a devicetree without a slots partition: the
    configuration stops and says what to add."""
    done = subprocess.run(
        [zephyr.west, "build", "--cmake-only", "-p", "always", "-b", NATIVE_SIM,
         "-d", str(tmp_path / "build"), str(REPO / APP), "--",
         f"-DCOLIBRI_MODEL_DIR={zephyr_model}", "-DCONFIG_COLIBRI_SLOTS=y",
         "-DCONFIG_FLASH_SIMULATOR_STATS=n"],
        cwd=REPO, env=board_env(NATIVE_SIM), capture_output=True, text=True, timeout=300)
    log = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0
    assert ("Colibri: CONFIG_COLIBRI_SLOTS needs a slots partition in the devicetree: a fixed "
            "partition labelled colibri_slots") in log, log[-3000:]


def test_a_partition_too_small_for_two_slots_is_reported(zephyr, zephyr_model, tmp_path):
    """A slots partition of three sectors holds the two records but no slot:
    colibri_zephyr_slots() refuses it, the runner says so on its UART and
    answers SLOT_* requests with NO_SLOTS."""
    from colibri_tools.protocol import DeviceError
    from colibri_tools.protocol.frames import ErrorCode, Msg

    overlay = BUILD_ROOT / "slots" / "small.overlay"
    text = "&colibri_slots {\n\treg = <0x00100000 0x3000>;\n};\n"
    if not overlay.exists() or overlay.read_text() != text:
        overlay.write_text(text)
    build = west_build(zephyr, APP, NATIVE_SIM, zephyr_model,
                       directory=BUILD_ROOT / "serial_runner-slots-small-native_sim",
                       extra=("-DFILE_SUFFIX=slots", f"-DEXTRA_DTC_OVERLAY_FILE={overlay}"))
    world = World(build, {}, {}, tmp_path)
    with Device(world, tmp_path / "flash.bin") as d:
        log = list(d.dev.text_log)
        assert any("ota: the slots partition is not usable" in t for t in log), log
        assert d.info.init_status != 0                  # nothing at the weights address either
        with pytest.raises(DeviceError) as caught:
            d.dev.transact(Msg.SLOT_STATUS, b"")
        assert caught.value.code == ErrorCode.NO_SLOTS
