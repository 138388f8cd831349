"""colibri_tools.board.flash_file: a flash's contents with a model image at a
partition's offset (the native_sim flash simulator's --flash=FILE)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from colibri_tools.board.flash import main as flash_main
from colibri_tools.board.flash_file import FlashFileError, storage_partition, write_flash_file
from colibri_tools.errors import ColibriError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ports" / "linux"))
from linux_tiny_image import write_tiny_image  # noqa: E402


@pytest.fixture
def valid_image(tmp_path):
    return write_tiny_image(tmp_path / "model.bin")


def test_the_image_lies_at_the_offset_among_erased_bytes(valid_image, tmp_path):
    image = valid_image.read_bytes()
    out = write_flash_file(tmp_path / "flash.bin", valid_image, offset=0x3000,
                           flash_size=0x3000 + len(image) + 100)
    data = out.read_bytes()
    assert data[:0x3000] == b"\xff" * 0x3000
    assert data[0x3000:0x3000 + len(image)] == image
    assert data[0x3000 + len(image):] == b"\xff" * 100
    zeros = write_flash_file(tmp_path / "zeros.bin", valid_image, offset=0,
                             flash_size=len(image) + 1, erase_value=0)
    assert zeros.read_bytes() == image + b"\x00"


def test_too_small_a_flash_or_not_an_image_is_refused(valid_image, tmp_path):
    size = valid_image.stat().st_size
    with pytest.raises(FlashFileError, match="does not fit"):
        write_flash_file(tmp_path / "f.bin", valid_image, offset=1, flash_size=size)
    bad = tmp_path / "bad.bin"
    bad.write_bytes(valid_image.read_bytes()[:300])
    with pytest.raises(ColibriError):
        write_flash_file(tmp_path / "g.bin", bad, offset=0, flash_size=size)
    assert not (tmp_path / "f.bin").exists() and not (tmp_path / "g.bin").exists()


DTS = """/dts-v1/;
/ {
	chosen {
		colibri,storage = &weights_part;          /* in x.dtsi:3 */
	};
	flash-controller@0 {
		flash0: flash@0 {
			reg = < 0x0 0x40000 >;
			partitions {
				compatible = "fixed-partitions";
				boot: partition@0 {
					reg = < 0x0 0x1000 >;
				};
				weights_part: partition@10000 {
					label = "w";
					reg = < 0x10000 0x30000 >; /* in y.dtsi:9 */
				};
			};
		};
	};
};
"""


def test_colibri_flash_writes_the_chosen_partition_of_a_build(valid_image, tmp_path, capsys):
    (tmp_path / "build" / "zephyr").mkdir(parents=True)
    (tmp_path / "build" / "zephyr" / "zephyr.dts").write_text(DTS)
    part = storage_partition(tmp_path / "build")
    assert (part.offset, part.size, part.flash_size) == (0x10000, 0x30000, 0x40000)
    assert flash_main(["--build-dir", str(tmp_path / "build"), "--weights", str(valid_image),
                       "--flash-file", str(tmp_path / "flash.bin")]) == 0
    data = (tmp_path / "flash.bin").read_bytes()
    image = valid_image.read_bytes()
    assert len(data) == 0x40000 and data[0x10000:0x10000 + len(image)] == image
    assert "at 0x10000 in the colibri,storage partition" in capsys.readouterr().out
    (tmp_path / "build" / "zephyr" / "zephyr.dts").write_text(DTS.replace("colibri,storage", "x"))
    with pytest.raises(FlashFileError, match="no colibri,storage partition"):
        storage_partition(tmp_path / "build")
    assert flash_main(["--build-dir", str(tmp_path), "--weights", str(valid_image),
                       "--flash-file", str(tmp_path / "f2.bin")]) == 1
    assert "not a Zephyr build directory" in capsys.readouterr().err
