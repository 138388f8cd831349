"""colibri-flash --slot auto: the plans it makes for each kind of board
(docs/ota.md), and what it refuses before anything runs. The QEMU run itself
is tests/ports/aarch64/test_aarch64_ota.py."""
from __future__ import annotations

import dataclasses
import re
import socket
import struct
import sys
import threading
from pathlib import Path

import pytest
from colibri_tools.board.flash import format_plan, main, plan_flash
from colibri_tools.board.flash_backends import FlashError
from colibri_tools.image import signing
from colibri_tools.protocol import Frame, Info, Msg, StreamDecoder, encode_frame
from colibri_tools.protocol.messages import SlotState
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ports" / "linux"))
    from linux_tiny_image import write_tiny_image

    return write_tiny_image(tmp_path_factory.mktemp("slots") / "model.bin")


@pytest.fixture(scope="module")
def signed(tiny_model):
    path = tiny_model.with_name("model.signed.bin")
    path.write_bytes(signing.sign_image(tiny_model.read_bytes(), KEY, image_version=3))
    return path


def test_qemu_plan_boots_sends_and_reboots(signed, tmp_path):
    fw = tmp_path / "fw.elf"
    fw.write_bytes(b"\x7fELF")
    plan = plan_flash("qemu_virt_a72", slot="auto", weights=signed, firmware=fw, workdir=tmp_path,
                      trusted_key=signing.raw_public(KEY.public_key()))
    text = format_plan(plan)
    assert f"-drive if=pflash,unit=1,format=raw,file={tmp_path}/slots.img" in text
    assert "SLOT_BEGIN, SLOT_WRITE" in text and len(plan.steps) == 3


def test_linux_board_plan_installs_with_colibri_slot(signed, tmp_path):
    plan = plan_flash("rpi4", slot="auto", weights=signed, workdir=tmp_path,
                      host="pi@raspberrypi.local",
                      trusted_key=signing.raw_public(KEY.public_key()), allow_older=True)
    last = plan.steps[-1].argv
    assert last[:2] == ("ssh", "pi@raspberrypi.local")
    assert last[2].startswith("colibri-slot install /var/lib/colibri/weights.slots "
                              "/home/pi/colibri/model.signed.bin --trusted-key ")
    assert last[2].endswith("--allow-older")


def test_refused_before_anything_runs(signed, tiny_model, tmp_path, capsys):
    fw = tmp_path / "fw.elf"
    fw.write_bytes(b"\x7fELF")
    with pytest.raises(FlashError, match="signed by key"):   # the device would say WRONG_KEY
        plan_flash("qemu_virt_a72", slot="auto", weights=signed, firmware=fw,
                   trusted_key=signing.raw_public(OTHER.public_key()))
    with pytest.raises(FlashError, match="not signed"):
        plan_flash("qemu_virt_a72", slot="auto", weights=tiny_model, firmware=fw,
                   trusted_key=signing.raw_public(KEY.public_key()))
    with pytest.raises(FlashError, match="no slot support"):
        plan_flash("stm32h747i_disco", slot="auto", weights=signed)
    with pytest.raises(FlashError, match="declares no A/B weight slots"):
        plan_flash("qemu_an547", slot="auto", weights=signed, firmware=fw)
    assert main(["--board", "qemu_virt_a72", "--slot", "auto", "--weights", str(signed),
                 "--dry-run"]) == 1
    assert "give --firmware" in capsys.readouterr().err


def test_serial_update_refusals_and_dry_run(signed, tmp_path, capsys):
    """--slot auto --serial URL (a device already running a slot runner; the
    run itself is tests/zephyr/test_zephyr_slots.py): what it refuses before
    it opens the port, and its dry run."""
    for argv in (["--serial", "/dev/null", "--weights", str(signed)],          # no --slot auto
                 ["--slot", "auto", "--serial", "/dev/null"],                  # no image
                 ["--slot", "auto", "--weights", str(signed)]):                # no board, no port
        with pytest.raises(SystemExit) as caught:
            main(argv)
        assert caught.value.code == 2, argv
    hex_file = tmp_path / "w.hex"
    hex_file.write_text(":00000001FF\n")
    assert main(["--slot", "auto", "--serial", "/nonexistent", "--weights", str(hex_file)]) == 1
    assert "not a HEX file" in capsys.readouterr().err
    pub = tmp_path / "other.pub"
    pub.write_bytes(OTHER.public_key().public_bytes(serialization.Encoding.PEM,
                                                    serialization.PublicFormat.SubjectPublicKeyInfo))
    assert main(["--slot", "auto", "--serial", "/nonexistent", "--weights", str(signed),
                 "--trusted-key", str(pub)]) == 1
    assert "the device would refuse it" in capsys.readouterr().err
    assert main(["--slot", "auto", "--serial", "/nonexistent", "--weights", str(signed)]) == 1
    assert "cannot open the port" in capsys.readouterr().err
    assert main(["--slot", "auto", "--serial", "/dev/pts/9", "--weights", str(signed),
                 "--dry-run"]) == 0
    assert "to the device at /dev/pts/9: SLOT_BEGIN, SLOT_WRITE x" in capsys.readouterr().out


def test_an_image_the_device_would_refuse_is_refused_before_the_device_is_opened(
        tiny_model, tmp_path, capsys):
    """A wrong metadata or data CRC-32: the device refuses the image only
    after erasing its inactive slot, so colibri-flash runs the device's
    checks first (issue 25), signed image or not, and never opens the port."""
    plain = tiny_model.read_bytes()
    fw = tmp_path / "fw.elf"
    fw.write_bytes(b"\x7fELF")
    for what, offset in (("metadata", 68), ("data", len(plain) - 100)):
        bad = bytearray(plain)
        bad[offset] ^= 1
        image = tmp_path / f"{what}.signed.bin"
        image.write_bytes(signing.sign_image(bytes(bad), KEY, image_version=4))
        for key in ([], ["--trusted-key", str(tmp_path / "key.pub")]):
            (tmp_path / "key.pub").write_bytes(KEY.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
            assert main(["--slot", "auto", "--serial", "/nonexistent", "--weights", str(image),
                         *key]) == 1, what
            err = capsys.readouterr().err
            assert f"{image}: COLIBRI_E_CHECKSUM: " in err, err
            assert "cannot open the port" not in err
        with pytest.raises(FlashError, match="COLIBRI_E_CHECKSUM"):
            plan_flash("qemu_virt_a72", slot="auto", weights=image, firmware=fw, workdir=tmp_path)
        with pytest.raises(FlashError, match="COLIBRI_E_CHECKSUM"):
            plan_flash("rpi4", slot="auto", weights=image, workdir=tmp_path,
                       host="pi@raspberrypi.local")


class LyingSlotDevice:
    """A TCP device serving HELLO and the SLOT_* requests, in a thread, whose
    replies can lie: SLOT_WRITTEN off by `extra` bytes, and the record after
    SLOT_FINISH left `final` (state, fingerprint) whatever was written."""

    def __init__(self, *, extra: int = 0, final: tuple[int, int] | None = None) -> None:
        self.extra, self.final = extra, final
        self.received = bytearray()
        self.state = SlotState(0, 0, 0, (3, 0), 1, (1, 0), (0x11111111, 0), 0, (1, 0), 1 << 20)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _reply(self, request: Frame) -> bytes:
        if request.type == Msg.HELLO:
            info = Info(1, 4096, 0, 0x11111111, 0, 64, 32, 0, 2, 4, 2, 1, 1, (0, 1, 0), 1,
                        "liar", "ticks")
            return info.pack()
        if request.type == Msg.SLOT_STATUS:
            return self.state.pack()
        if request.type == Msg.SLOT_BEGIN:
            return struct.pack("<II", 0, 1)
        if request.type == Msg.SLOT_WRITE:
            self.received += request.payload[8:]
            return struct.pack("<IQ", 0, len(self.received) + self.extra)
        fingerprint = int.from_bytes(self.received[24:28], "little")
        state, fp = self.final or (1, fingerprint)
        self.state = dataclasses.replace(self.state, state=(3, state), fingerprint=(0x11111111, fp))
        return struct.pack("<I", 0)

    def _serve(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:                 # closed before a client came
            return
        decoder = StreamDecoder()
        with conn:
            while data := conn.recv(65536):
                for event in decoder.feed(data):
                    if isinstance(event, Frame):
                        conn.sendall(encode_frame(event.type | 0x80, event.seq,
                                                  self._reply(event)))

    def close(self) -> None:
        self.server.close()


@pytest.mark.parametrize("lie, message", [
    ({}, None),
    ({"extra": 100}, r"SLOT_WRITTEN says \d+ bytes of slot B are written, but \d+ of the"),
    ({"extra": -1}, r"SLOT_WRITTEN says \d+ bytes"),
    ({"final": (0, 0)}, r"SLOT_FINISH reported success, but the record says slot B: empty, "
                        r"fingerprint 0x00000000.*would make slot B pending, fingerprint 0x"),
    ({"final": (1, 0x22222222)}, r"record says slot B: pending, fingerprint 0x22222222"),
])
def test_a_device_whose_replies_contradict_what_was_sent_is_not_believed(signed, capsys, lie,
                                                                          message):
    """SLOT_WRITTEN must count the bytes sent so far, and after SLOT_FINISH the
    record must name the image sent (pending, its fingerprint): a device that
    says otherwise fails the update, never 'written and verified' (issue 25)."""
    device = LyingSlotDevice(**lie)
    try:
        status = main(["--slot", "auto", "--serial", device.url, "--weights", str(signed),
                       "--timeout", "10"])
    finally:
        device.close()
    out, err = capsys.readouterr()
    if message is None:
        assert status == 0 and "slot B written and verified" in out, err
        assert bytes(device.received) == signed.read_bytes()
        return
    assert status == 1 and "written and verified" not in out
    assert re.search(message, err) and device.url in err, err
