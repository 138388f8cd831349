"""A damaged or missing model image is reported by the firmware, with the
status the self-test documents, instead of running on bad weights."""
from __future__ import annotations

import pytest
from cm_helpers import QEMU_BOARDS, fields, run_qemu, selftest_lines
from colibri_tools.image.image_reader import read_image


@pytest.mark.parametrize("board", QEMU_BOARDS)
def test_flipped_weight_byte_is_reported_by_colibri_verify(board, need_qemu, cm_firmware,
                                                           cm_model, tmp_path):
    image = read_image(cm_model / "model.bin")
    index = len(image.tensors) - 1          # the last expert's down projection
    tensor = image.tensors[index]
    data = bytearray((cm_model / "model.bin").read_bytes())
    data[tensor.offset + tensor.size // 2] ^= 0x40
    damaged = tmp_path / "damaged.bin"
    damaged.write_bytes(bytes(data))

    done = run_qemu(board, cm_firmware(board).elf, damaged)
    lines = selftest_lines(done.stdout)
    assert lines["init"] == "init: success"  # tensor data is not read by colibri_init
    verify = fields(lines["verify"])
    assert lines["verify"].startswith("verify: FAILED"), lines["verify"]
    assert verify["status"] == "5"          # COLIBRI_E_CHECKSUM
    assert int(verify["bad_tensor"]) == index
    assert "SELFTEST FAIL colibri_verify" in done.stdout
    assert done.returncode == 3


@pytest.mark.parametrize("board", QEMU_BOARDS)
def test_no_image_at_the_weight_address(board, need_qemu, cm_firmware):
    done = run_qemu(board, cm_firmware(board).elf, None)
    assert fields(selftest_lines(done.stdout)["image"])["found"] == "no"
    assert "SELFTEST FAIL no model image" in done.stdout
    assert done.returncode == 2
