"""colibri-flash --slot auto: the plans it makes for each kind of board
(docs/ota.md), and what it refuses before anything runs. The QEMU run itself
is tests/ports/aarch64/test_aarch64_ota.py."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from colibri_tools.board.flash import format_plan, main, plan_flash
from colibri_tools.board.flash_backends import FlashError
from colibri_tools.image import signing
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
