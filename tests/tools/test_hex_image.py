"""colibri-image: Intel HEX of a model image at a board's weight address,
merged with firmware, refused when things overlap or do not fit, read back.

Golden values: the model file's own bytes and zlib's CRC-32, the intelhex
package's parse of what we write (an independent reader), GNU objcopy's HEX of
the same ELF, and a line-by-line decoder written here from the format's text.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from board_files import write_board
from colibri_tools.board.boards import BoardError, Region
from colibri_tools.board.hex_firmware import Piece, check_layout, load_firmware
from colibri_tools.board.hex_image import build_hex, check_file, main
from colibri_tools.board.hex_records import HexImageError
from colibri_tools.converter.convert import convert
from hf_models import build_model, save_checkpoint
from intelhex import IntelHex

ROOT = Path(__file__).resolve().parents[2]
ARM_GCC = shutil.which("arm-none-eabi-gcc")
ARM_OBJCOPY = shutil.which("arm-none-eabi-objcopy")


def hex_lines(path: Path) -> list[bytes]:
    return [bytes.fromhex(line[1:]) for line in path.read_text().split()]


def decoded_bytes(path: Path) -> tuple[int, bytes]:
    """(first address, bytes) of a HEX file holding one contiguous run, decoded
    line by line here (data, extended linear address and EOF records only)."""
    base, start, out = 0, None, bytearray()
    for rec in hex_lines(path):
        assert rec[0] == len(rec) - 5 and sum(rec) % 256 == 0
        kind = rec[3]
        if kind == 4:
            base = int.from_bytes(rec[4:6], "big") << 16
        elif kind == 0:
            address = base + (rec[1] << 8 | rec[2])
            start = address if start is None else start
            assert address == start + len(out), "records out of order or with gaps"
            out += rec[4:-1]
        else:
            assert kind == 1
    return start, bytes(out)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tiny_model")
    model, _ = build_model("mixtral", seed=0)
    save_checkpoint(model, d / "hf")
    return convert(d / "hf", d / "out", context=32, progress=False).image_path


@pytest.fixture(scope="module")
def model_16mib(tmp_path_factory) -> Path:
    """A valid model image of about 16 MiB (vocabulary 32768 x hidden 64)."""
    d = tmp_path_factory.mktemp("model_16mib")
    model, _ = build_model("mixtral", seed=1, vocab_size=32768, hidden_size=64)
    save_checkpoint(model, d / "hf")
    return convert(d / "hf", d / "out", context=16, progress=False).image_path


@pytest.fixture
def board(tmp_path) -> Path:
    return write_board(tmp_path, "hexboard")


def test_weights_hex_holds_the_model_at_the_weight_address(tiny_model, board, tmp_path):
    out = tmp_path / "weights.hex"
    result = build_hex(tiny_model, board, out)
    ih = IntelHex(str(out))
    data = tiny_model.read_bytes()
    assert ih.minaddr() == 0x90000000 and ih.maxaddr() == 0x90000000 + len(data) - 1
    assert ih.tobinstr() == data
    assert result.model_crc32 == zlib.crc32(data)
    assert result.check.checked_bytes == len(data)
    records = hex_lines(out)
    assert records[0] == bytes.fromhex("020000049000") + bytes([(-0x96) & 0xFF])
    assert max(r[0] for r in records if r[3] == 0) == 32
    assert records[-1] == bytes.fromhex("00000001FF")
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("record_size", [16, 32])
def test_records_never_cross_a_64k_segment(tiny_model, tmp_path, record_size):
    # 0x0800F000 + 184 KiB crosses three 64 KiB boundaries, none on a record edge
    # of 16 or 32 bytes from the start: the writer must split there.
    board = write_board(tmp_path, "segboard", address=0x0800F000, size=0x100000,
                        code=0x00000000)
    out = tmp_path / "w.hex"
    build_hex(tiny_model, board, out, record_size=record_size)
    base, elas = 0, []
    for rec in hex_lines(out):
        if rec[3] == 4:
            base = int.from_bytes(rec[4:6], "big") << 16
            elas.append(base)
        elif rec[3] == 0:
            low = rec[1] << 8 | rec[2]
            assert low + rec[0] <= 0x10000 and 0 < rec[0] <= record_size
    size = tiny_model.stat().st_size
    assert elas == list(range(0x08000000, 0x0800F000 + size, 0x10000))
    assert decoded_bytes(out) == (0x0800F000, tiny_model.read_bytes())


def test_check_verifies_a_hex_and_a_raw_readback(tiny_model, board, tmp_path):
    out = tmp_path / "w.hex"
    build_hex(tiny_model, board, out)
    assert "complete" in check_file(out, board, tiny_model)
    dump = tmp_path / "readback.bin"
    dump.write_bytes(tiny_model.read_bytes() + b"\xff" * 100)   # a readback may run longer
    assert "match" in check_file(dump, board, tiny_model)
    assert "match" in check_file(dump, board, out)              # raw readback vs the HEX
    bad = bytearray(tiny_model.read_bytes())
    bad[5000] ^= 0x40
    dump.write_bytes(bytes(bad))
    with pytest.raises(HexImageError, match="0x90001388"):
        check_file(dump, board, tiny_model)
    with pytest.raises(HexImageError, match="0x90001388"):
        check_file(dump, board, out)


def _edit_line(path: Path, index: int, edit) -> None:
    lines = path.read_text().splitlines()
    lines[index] = edit(lines[index])
    path.write_text("\n".join(lines) + "\n")


def _with_checksum(body: bytes) -> str:
    return ":" + (body + bytes([-sum(body) & 0xFF])).hex().upper()


@pytest.mark.parametrize("damage, message", [
    ("checksum", "line 3: bad checksum"),
    ("data", "is 0x"),
    ("drop", "missing"),
    ("repeat", "written twice"),
    ("truncate", "no end-of-file record"),
    ("garbage", "must start with ':'"),
])
def test_check_refuses_a_damaged_hex(tiny_model, board, tmp_path, damage, message):
    out = tmp_path / "w.hex"
    build_hex(tiny_model, board, out)
    lines = out.read_text().splitlines()
    if damage == "checksum":
        _edit_line(out, 2, lambda s: s[:-2] + ("00" if s[-2:] != "00" else "01"))
    elif damage == "data":
        def flip(s: str) -> str:
            rec = bytearray(bytes.fromhex(s[1:-2]))
            rec[10] ^= 1
            return _with_checksum(bytes(rec))
        _edit_line(out, 40, flip)
    elif damage == "drop":
        out.write_text("\n".join(lines[:40] + lines[41:]) + "\n")
    elif damage == "repeat":
        out.write_text("\n".join(lines[:40] + [lines[39]] + lines[40:]) + "\n")
    elif damage == "truncate":
        out.write_text("\n".join(lines[:-1]) + "\n")
    else:
        out.write_text("\n".join(lines[:7] + ["hello"] + lines[7:]) + "\n")
    with pytest.raises(HexImageError, match=message):
        check_file(out, board, tiny_model)


def test_readback_failure_leaves_no_output(tiny_model, board, tmp_path, monkeypatch):
    import colibri_tools.board.hex_image as hx

    real = hx._data_lines

    def corrupt(address, data, record_size):
        text = bytearray(real(address, data, record_size))
        if address == 0x90010000:
            text[9] = ord("0") if text[9] != ord("0") else ord("1")   # first data digit
        return bytes(text)

    monkeypatch.setattr(hx, "_data_lines", corrupt)
    out = tmp_path / "w.hex"
    with pytest.raises(HexImageError, match="line"):
        build_hex(tiny_model, board, out)
    assert not out.exists() and not list(tmp_path.glob("*.tmp"))


def test_model_larger_than_the_weight_region_is_refused(tiny_model, tmp_path):
    small = write_board(tmp_path, "small", size=0x10000)
    with pytest.raises(HexImageError, match=r"0x90000000\.\.0x9000FFFF holds only 65536 bytes"):
        build_hex(tiny_model, small, tmp_path / "w.hex")
    assert not (tmp_path / "w.hex").exists()


def test_weight_address_not_aligned_for_the_model_is_refused(tiny_model, tmp_path):
    odd = write_board(tmp_path, "odd", address=0x90000040, alignment=64)
    with pytest.raises(HexImageError, match="not a multiple of the model's expert-block alignment"):
        build_hex(tiny_model, odd, tmp_path / "w.hex")


def test_addresses_past_4_gib_are_refused(tiny_model, tmp_path):
    """Intel HEX reaches 4 GiB: a 32-bit board cannot even declare more (its
    board file is refused), and a 64-bit one's weights above it get no HEX."""
    high = write_board(tmp_path, "high", address=0xFFFF0000, size=0x100000)
    with pytest.raises(BoardError, match="below 2\\^32"):
        build_hex(tiny_model, high, tmp_path / "w.hex")
    text = high.read_text().replace('arch = "armv7e-m"', 'arch = "aarch64"')
    text = text.replace('cpu = "cortex-m7"', 'cpu = "cortex-a72"').replace(
        '"-mcpu=cortex-m7", "-mthumb"', '"-mcpu=cortex-a72"')
    high.write_text(text.replace("baremetal-cortex-m", "baremetal-aarch64"))
    with pytest.raises(HexImageError, match="4 GiB"):
        build_hex(tiny_model, high, tmp_path / "w.hex")


def test_overlapping_inputs_name_the_range():
    weights = Region(0x90000000, 0x1000000)
    model = Piece(0x90000000, 0x30000, "model.bin", data=b"")
    with pytest.raises(HexImageError, match=r"fw segment 1 writes 0x90FFFF00\.\.0x90FFFFFF"):
        check_layout(weights, [model, Piece(0x90FFFF00, 0x200, "fw segment 1", data=b"")], "b")
    a, b = Piece(0x08000000, 0x100, "a", data=b""), Piece(0x080000F0, 0x100, "b", data=b"")
    with pytest.raises(HexImageError, match=r"a and b both write 0x080000F0\.\.0x080000FF"):
        check_layout(weights, [model, a, b], "b")


# ---- firmware merge ---------------------------------------------------------------

FIRMWARE_C = """
const unsigned table[64] = {1, 2, 3, 4, 5, 6, 7, 8};
unsigned counter = 7;
void Reset_Handler(void);
void Reset_Handler(void) { for (;;) { counter += table[counter & 63u]; } }
__attribute__((section(".vectors"), used)) const void *vectors[2] = {
    (void *)0x24010000, (void *)Reset_Handler};
"""


def _firmware_elf(tmp_path: Path, weights_section: bool = False) -> Path:
    if ARM_GCC is None or ARM_OBJCOPY is None:
        pytest.skip("arm-none-eabi-gcc/objcopy not installed (apt-get install gcc-arm-none-eabi)")
    src = tmp_path / "fw.c"
    intruder = '__attribute__((section(".weights"), used)) const char intruder[16] = {1};\n'
    src.write_text(FIRMWARE_C + (intruder if weights_section else ""))
    ld = tmp_path / "fw.ld"
    ld.write_text("""
MEMORY { FLASH (rx) : ORIGIN = 0x08000000, LENGTH = 2M  RAM (rwx) : ORIGIN = 0x24000000, LENGTH = 512K
         QSPI (r) : ORIGIN = 0x90000000, LENGTH = 64M }
SECTIONS {
  .text : { KEEP(*(.vectors)) *(.text*) *(.rodata*) } > FLASH
  .data : { *(.data*) } > RAM AT > FLASH
  .bss (NOLOAD) : { *(.bss*) } > RAM
  .weights : { KEEP(*(.weights)) } > QSPI
}
""")
    elf = tmp_path / "fw.elf"
    subprocess.run([ARM_GCC, "-mcpu=cortex-m7", "-mthumb", "-O1", "-nostdlib", "-ffreestanding",
                    "-T", str(ld), str(src), "-o", str(elf)], check=True)
    return elf


def _objcopy_hex(elf: Path) -> IntelHex:
    out = elf.with_suffix(".objcopy.hex")
    subprocess.run([ARM_OBJCOPY, "-O", "ihex", str(elf), str(out)], check=True)
    return IntelHex(str(out))


@pytest.mark.parametrize("kind", ["elf", "hex"])
def test_merge_with_firmware(tiny_model, board, tmp_path, kind):
    elf = _firmware_elf(tmp_path)
    reference = _objcopy_hex(elf)        # GNU objcopy: segments at their load addresses
    firmware = elf if kind == "elf" else elf.with_suffix(".objcopy.hex")
    merged = tmp_path / "merged.hex"
    result = build_hex(tiny_model, board, merged, firmware=firmware)
    ih = IntelHex(str(merged))
    for start, end in reference.segments():
        assert ih.tobinstr(start=start, end=end - 1) == reference.tobinstr(start=start, end=end - 1)
    fw_bytes = sum(end - start for start, end in reference.segments())
    data = tiny_model.read_bytes()
    assert ih.tobinstr(start=0x90000000, end=0x90000000 + len(data) - 1) == data
    assert len(ih) == len(data) + fw_bytes
    assert ih.start_addr == reference.start_addr
    assert result.check.checked_bytes == len(data) + fw_bytes
    assert "outside the weight region" in check_file(merged, board, tiny_model)


def test_truncated_firmware_hex_is_refused(tiny_model, board, tmp_path):
    """A firmware HEX cut short (no end-of-file record) is half a firmware:
    colibri-image refuses to merge it and names the file."""
    elf = _firmware_elf(tmp_path)
    _objcopy_hex(elf)
    whole = elf.with_suffix(".objcopy.hex").read_bytes().splitlines(keepends=True)
    half = tmp_path / "half.hex"
    half.write_bytes(b"".join(whole[: len(whole) // 2]))
    with pytest.raises(HexImageError, match=r"half\.hex.*no end-of-file record"):
        build_hex(tiny_model, board, tmp_path / "merged.hex", firmware=half)
    assert not (tmp_path / "merged.hex").exists()
    build_hex(tiny_model, board, tmp_path / "merged.hex", firmware=elf.with_suffix(".objcopy.hex"))


def test_records_after_an_early_end_of_file_record_are_refused(tiny_model, board, tmp_path,
                                                              capsys):
    """`cat boot.hex app.hex > both.hex`: intelhex stops at boot.hex's
    end-of-file record, so the application would silently vanish from the
    merged file (issue 25). Refused, naming the file and the line."""
    boot, app = IntelHex(), IntelHex()
    boot.frombytes(bytes(range(64)), offset=0x08000000)
    app.frombytes(bytes(range(100, 164)), offset=0x08010000)
    for ih, name in ((boot, "boot.hex"), (app, "app.hex")):
        ih.write_hex_file(str(tmp_path / name))
    first = (tmp_path / "boot.hex").read_bytes()
    both = tmp_path / "both.hex"
    both.write_bytes(first + (tmp_path / "app.hex").read_bytes())
    eof_line = len(first.splitlines())
    with pytest.raises(HexImageError, match=rf"both\.hex: line {eof_line + 1}: record after "
                                            rf"the end-of-file record at line {eof_line}"):
        load_firmware(both)
    out = tmp_path / "out.hex"
    assert main([str(tiny_model), "--board", str(board), "--merge", str(both),
                 "-o", str(out), "-q"]) == 1
    assert "both.hex: line" in capsys.readouterr().err
    assert not out.exists()
    # each file alone is fine, and blank lines after the one end-of-file record too
    (tmp_path / "app_blank.hex").write_bytes((tmp_path / "app.hex").read_bytes() + b"\n\n")
    assert [p.address for p in load_firmware(tmp_path / "app_blank.hex").pieces] == [0x08010000]
    build_hex(tiny_model, board, out, firmware=tmp_path / "boot.hex")


def test_elf_reader_agrees_with_objcopy(tmp_path):
    elf = _firmware_elf(tmp_path)
    reference = _objcopy_hex(elf)
    fw = load_firmware(elf)
    mine = IntelHex()
    for piece in fw.pieces:
        mine.puts(piece.address, piece.data)
    assert mine.segments() == reference.segments()
    assert mine.todict() == {k: v for k, v in reference.todict().items() if k != "start_addr"}
    assert fw.start is not None and int.from_bytes(fw.start[1], "big") == reference.start_addr["EIP"]


def test_firmware_inside_the_weight_region_is_refused(tiny_model, board, tmp_path):
    elf = _firmware_elf(tmp_path, weights_section=True)
    with pytest.raises(HexImageError, match=r"fw.elf segment \d writes 0x90000000\.\.0x9000000F, "
                                            r"inside board hexboard's weight region"):
        build_hex(tiny_model, board, tmp_path / "m.hex", firmware=elf)


def _elf32(path: Path, segments: list[tuple[int, bytes]]) -> Path:
    """A minimal little-endian ELF32 with one PT_LOAD per (address, bytes)."""
    n = len(segments)
    out = struct.pack("<16sHHIIIIIHHHHHH", b"\x7fELF\x01\x01\x01" + bytes(9), 2, 40, 1, 0,
                      52, 0, 0, 52, 32, n, 40, 0, 0)
    offset, blobs = 52 + 32 * n, b""
    for address, blob in segments:
        out += struct.pack("<8I", 1, offset, address, address, len(blob), len(blob), 5, 4)
        blobs += blob
        offset += len(blob)
    path.write_bytes(out + blobs)
    return path


def test_adjacent_inputs_read_back_as_one_run(tiny_model, tmp_path):
    # Segments back to back, sizes multiples of the record size, and firmware
    # right after a weight region the model fills exactly: the records form one
    # seamless run across several inputs, which the readback must split.
    size = tiny_model.stat().st_size
    assert size % 32 == 0
    # (The board's code region starts where its weight region ends: firmware
    # must load into code, board_check.)
    end = 0x90000000 + size
    board = write_board(tmp_path, "snug", size=size, code=end, code_length=0x10000)
    elf = _elf32(tmp_path / "fw.elf", [(end + 0x800, bytes(range(256)) * 4),
                                       (end + 0xC00, b"\xa5" * 1024),
                                       (end, b"\x5a" * 2048)])
    merged = tmp_path / "merged.hex"
    result = build_hex(tiny_model, board, merged, firmware=elf)
    assert result.check.checked_bytes == size + 4096
    ih = IntelHex(str(merged))
    assert ih.tobinstr(start=0x90000000, end=end + 2047) == \
        tiny_model.read_bytes() + b"\x5a" * 2048
    assert "plus 2048 bytes outside" not in check_file(merged, board, tiny_model)
    assert "plus 4096 bytes outside the weight region" in check_file(merged, board, tiny_model)


# ---- command line -------------------------------------------------------------------

def test_cli_writes_weights_and_merged_files(tiny_model, board, tmp_path, capsys):
    elf = _firmware_elf(tmp_path)
    w, m = tmp_path / "weights.hex", tmp_path / "merged.hex"
    assert main([str(tiny_model), "--board", str(board), "--merge", str(elf),
                 "-o", str(w), "-o", str(m), "-q"]) == 0
    assert IntelHex(str(w)).tobinstr() == tiny_model.read_bytes()
    assert len(IntelHex(str(m))) > len(IntelHex(str(w)))
    assert main(["--check", str(w), "--board", str(board), "--model", str(tiny_model)]) == 0
    assert "complete" in capsys.readouterr().out
    small = write_board(tmp_path, "small", size=0x1000)
    assert main([str(tiny_model), "--board", str(small), "-o", str(tmp_path / "x.hex"), "-q"]) == 1
    assert "holds only 4096 bytes" in capsys.readouterr().err


# ---- large images: streamed, bounded memory -------------------------------------------

# Peak RSS of the child's own address space: VmHWM. (ru_maxrss would do in a
# child of a small process, but Linux carries the parent's high-water mark
# across vfork+exec, and the pytest parent holds torch.)
MEASURE = """
import re, sys, time
sys.path.insert(0, {tools!r})
from colibri_tools.board.hex_image import build_hex
t = time.perf_counter()
build_hex({model!r}, {board!r}, {out!r})
seconds = time.perf_counter() - t
status = open("/proc/self/status").read()
print(seconds, re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1))
"""


def test_16_mib_image_streams_in_bounded_memory(model_16mib, board, tmp_path):
    out = tmp_path / "big.hex"
    code = MEASURE.format(tools=str(ROOT / "tools"), model=str(model_16mib), board=str(board),
                          out=str(out))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, max_rss_kib = done.stdout.split()     # VmHWM, in KiB
    size = model_16mib.stat().st_size
    print(f"\n{size / 2**20:.1f} MiB image: write + readback {float(seconds):.2f} s, "
          f"peak RSS {int(max_rss_kib) / 1024:.1f} MiB")
    assert size > 16 * 2**20
    assert int(max_rss_kib) < 100 * 1024, "the writer or the readback holds the image in memory"
    start, data = decoded_bytes(out)
    assert start == 0x90000000
    assert zlib.crc32(data) == zlib.crc32(model_16mib.read_bytes()) and len(data) == size


def test_output_that_is_an_input_is_refused(tiny_model, board, tmp_path):
    """colibri-image m.bin -o m.bin (or a link to it) would turn the model into
    HEX text: refused, and the model is left as it was."""
    before = tiny_model.read_bytes()
    link = tmp_path / "same.bin"
    link.symlink_to(tiny_model)
    for output in (tiny_model, link):
        with pytest.raises(HexImageError, match="would destroy the input"):
            build_hex(tiny_model, board, output)
    assert main([str(tiny_model), "--board", str(board), "-o", str(tiny_model), "--quiet"]) == 1
    assert tiny_model.read_bytes() == before


@pytest.mark.parametrize("what, data, needle", [
    ("ELF64 header cut short", b"\x7fELF\x02\x01\x01" + bytes(53), "ELF64 header cut short"),
    ("program headers smaller than an entry",
     struct.pack("<16sHHIIIIIHHHHHH", b"\x7fELF\x01\x01\x01" + bytes(9), 2, 40, 1, 0, 52, 0, 0,
                 52, 4, 1, 40, 0, 0) + bytes(8), "at least 32"),
    ("program header table past the end",
     struct.pack("<16sHHIIIIIHHHHHH", b"\x7fELF\x01\x01\x01" + bytes(9), 2, 40, 1, 0,
                 0xFFFFFFF0, 0, 0, 52, 32, 3, 40, 0, 0), "past the end"),
])
def test_hostile_elf_is_a_clear_error(what, data, needle, tmp_path):
    """Hand-made ELF files: an error naming the file, never struct.error (issue 13)."""
    path = tmp_path / "fw.elf"
    path.write_bytes(data)
    with pytest.raises(HexImageError, match=needle) as info:
        load_firmware(path)
    assert "fw.elf" in str(info.value)
