"""Board files are the single source of truth: every file in boards/ loads, and
what is derived from it (linker MEMORY, board_config.h, make variables, the
HEX address) says the same as the file. Each derived file is read back by the
tool that consumes it: GNU ld for the MEMORY block, the C compiler for
board_config.h, intelhex for the HEX. Expected values come from the TOML
parsed here with tomllib.

A model too large for a board is refused twice: by colibri-image, and at
compile time by board_config.h's static assertions against model_config.h.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from board_files import write_board
from colibri_tools.board import boards
from colibri_tools.board.boards import BOARDS_DIR, board_names, config_header, linker_memory, load, make_vars
from colibri_tools.board.hex_image import build_hex
from colibri_tools.board.hex_image import main as image_main
from colibri_tools.board.hex_records import HexImageError
from colibri_tools.converter.convert import convert
from hf_models import build_model, save_checkpoint
from intelhex import IntelHex

HOST_CC = shutil.which("gcc") or shutil.which("cc")
NAMES = board_names()
ALL = pytest.mark.parametrize("name", NAMES or [pytest.param(
    None, marks=pytest.mark.skip(reason="boards/ has no board files yet"))])


def raw(name: str) -> dict:
    return tomllib.loads((BOARDS_DIR / f"{name}.toml").read_text())


def bare_metal(name: str) -> bool:
    return raw(name)["port"].startswith("baremetal-")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("boards_model")
    hf, _ = build_model("switch", seed=4)
    save_checkpoint(hf, d / "hf")
    return convert(d / "hf", d / "out", context=16, progress=False).image_path


def compile_c(source: str, include: list[Path], tmp_path: Path) -> subprocess.CompletedProcess:
    if HOST_CC is None:
        pytest.skip("no host C compiler")
    src = tmp_path / "check.c"
    src.write_text(source)
    return subprocess.run([HOST_CC, "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic",
                           "-fsyntax-only", *(f"-I{d}" for d in include), str(src)],
                          check=False, capture_output=True, text=True)


@ALL
def test_board_file_loads_as_written(name):
    data, board = raw(name), load(name)
    assert board.name == data["name"] == name
    assert (board.arch, board.cpu, board.port) == (data["arch"], data["cpu"], data["port"])
    assert board.weights.origin == data["weights"]["address"]
    assert board.weights.length == data["weights"]["size"]
    assert board.weights_alignment == data["weights"].get("alignment", 4096)
    assert list(board.cflags) == data["cflags"]
    for key, region in (("code", board.code), ("ram", board.ram)):
        table = data.get("memory", {}).get(key)
        assert (region is None) == (table is None)
        if table:
            assert (region.origin, region.length) == (table["origin"], table["length"])


@ALL
def test_flash_keys_repeating_addresses_agree(name):
    # Some board files repeat an address in [flash] for the flash tools; a
    # repeated fact must equal the original.
    data = raw(name)
    flash = data.get("flash", {})
    if "weights_address" in flash:
        assert flash["weights_address"] == data["weights"]["address"]
    if "firmware_address" in flash:
        assert flash["firmware_address"] == data["memory"]["code"]["origin"]


LINK_CHECK = """
INCLUDE memory.ld
SECTIONS
{
  .text : { *(.text*) } > CODE
  .data : { *(.data*) } > RAM
}
code_origin = ORIGIN(CODE);     code_length = LENGTH(CODE);
ram_origin = ORIGIN(RAM);       ram_length = LENGTH(RAM);
weights_origin = ORIGIN(WEIGHTS); weights_length = LENGTH(WEIGHTS);
"""


@ALL
def test_linker_memory_read_back_by_ld(name, tmp_path):
    if not bare_metal(name):
        pytest.skip(f"{name} runs the Linux port: no linker script")
    data = raw(name)
    prefix = data["cross_prefix"]
    if shutil.which(prefix + "gcc") is None:
        pytest.skip(f"{prefix}gcc not installed")
    (tmp_path / "memory.ld").write_text(linker_memory(load(name)))
    (tmp_path / "check.ld").write_text(LINK_CHECK)
    (tmp_path / "x.c").write_text("int x = 1;\nint f(void);\nint f(void) { return x; }\n")
    subprocess.run([prefix + "gcc", *data["cflags"], "-c", str(tmp_path / "x.c"), "-o",
                    str(tmp_path / "x.o")], check=True)
    subprocess.run([prefix + "ld", "-L", str(tmp_path), "-T", str(tmp_path / "check.ld"),
                    str(tmp_path / "x.o"), "-o", str(tmp_path / "x.elf")], check=True)
    nm = subprocess.run([prefix + "nm", str(tmp_path / "x.elf")], check=True,
                        capture_output=True, text=True).stdout
    symbols = {parts[2]: int(parts[0], 16) for parts in map(str.split, nm.splitlines())
               if len(parts) == 3}
    memory, weights = data["memory"], data["weights"]
    assert symbols["code_origin"] == memory["code"]["origin"]
    assert symbols["code_length"] == memory["code"]["length"]
    assert symbols["ram_origin"] == memory["ram"]["origin"]
    assert symbols["ram_length"] == memory["ram"]["length"]
    assert symbols["weights_origin"] == symbols["__colibri_weights_start"] == weights["address"]
    assert symbols["weights_length"] == symbols["__colibri_weights_size"] == weights["size"]


@ALL
def test_board_config_header_read_back_by_the_compiler(name, tmp_path):
    data = raw(name)
    (tmp_path / "board_config.h").write_text(config_header(load(name)))
    w = data["weights"]
    checks = {"COLIBRI_BOARD_WEIGHTS_ADDR": w["address"], "COLIBRI_BOARD_WEIGHTS_SIZE": w["size"],
              "COLIBRI_BOARD_WEIGHTS_ALIGN": w.get("alignment", 4096),
              f"COLIBRI_BOARD_{name.upper()}": 1,
              "sizeof COLIBRI_BOARD_NAME": len(name) + 1}
    if "uart" in data:
        checks["COLIBRI_BOARD_UART_BASE"] = data["uart"]["base"]
        checks["COLIBRI_BOARD_UART_CLOCK_HZ"] = data["uart"]["clock_hz"]
        checks["COLIBRI_BOARD_UART_BAUD"] = data["uart"].get("baud", 115200)
    if "ticks" in data:
        checks["COLIBRI_BOARD_TICKS_HZ"] = data["ticks"]["hz"]
    lines = ['#include "board_config.h"', '#include "board_config.h"  /* guarded */']
    lines += [f'_Static_assert({macro} == {value}ULL, "{macro}");' for macro, value in checks.items()]
    done = compile_c("\n".join(lines) + "\n", [tmp_path], tmp_path)
    assert done.returncode == 0, done.stderr


@ALL
def test_make_variables_state_the_weight_address(name):
    text = make_vars(load(name))
    values = dict(line.split(" := ", 1) for line in text.splitlines() if " := " in line)
    assert int(values["BOARD_WEIGHTS_ADDR"], 16) == raw(name)["weights"]["address"]
    assert values["BOARD_CC"] == raw(name)["cross_prefix"] + "gcc"


@ALL
def test_hex_address_is_the_weight_address(name, tiny_model, tmp_path):
    data = raw(name)
    out = tmp_path / "weights.hex"
    if data["port"] == "linux":
        with pytest.raises(HexImageError, match="Linux port"):
            build_hex(tiny_model, name, out)
        return
    build_hex(tiny_model, name, out)
    ih = IntelHex(str(out))
    assert ih.minaddr() == data["weights"]["address"]
    assert ih.tobinstr() == tiny_model.read_bytes()


# ---- a model too large for the board: refused by colibri-image and by the compiler ----------

def synthetic(folder: Path, name: str, address: int, size: int, alignment: int = 4096) -> Path:
    return write_board(folder, name, address=address, size=size, alignment=alignment,
                       code_length=0x100000)


BOTH_HEADERS = '#include "model_config.h"\n#include "board_config.h"\nint board_ok;\n'


def _headers(board_file: Path, model: Path, tmp_path: Path, monkeypatch) -> list[Path]:
    monkeypatch.setattr(boards, "REPO", board_file.parent)   # header names the file relative to REPO
    (tmp_path / "board_config.h").write_text(config_header(load(board_file)))
    return [tmp_path, model.parent]


@pytest.mark.parametrize("size, fits", [(0x10000, False), (0x100000, True)])
def test_model_size_is_checked_by_colibri_image_and_by_the_compiler(size, fits, tiny_model,
                                                                    tmp_path, monkeypatch, capsys):
    board = synthetic(tmp_path, "tiny_flash", 0x90000000, size)
    status = image_main([str(tiny_model), "--board", str(board), "-o", str(tmp_path / "w.hex"), "-q"])
    done = compile_c(BOTH_HEADERS, _headers(board, tiny_model, tmp_path, monkeypatch), tmp_path)
    if fits:
        assert status == 0 and done.returncode == 0, done.stderr
    else:
        assert status == 1 and "holds only 65536 bytes" in capsys.readouterr().err
        assert done.returncode != 0
        assert "static assertion failed: \"model image larger than the board" in done.stderr


def test_misaligned_weight_address_is_checked_twice(tiny_model, tmp_path, monkeypatch):
    board = synthetic(tmp_path, "odd_flash", 0x90000040, 0x100000, alignment=64)
    with pytest.raises(HexImageError, match="alignment 4096"):
        build_hex(tiny_model, board, tmp_path / "w.hex")
    done = compile_c(BOTH_HEADERS, _headers(board, tiny_model, tmp_path, monkeypatch), tmp_path)
    assert "weight address not aligned" in done.stderr


def test_real_board_refuses_a_model_bigger_than_its_weight_region(tmp_path, monkeypatch, capsys):
    # qemu_an500 keeps its weights in 16 MiB of PSRAM; a 16.2 MiB model
    # (vocabulary 32768 x hidden 64) must not go there.
    if "qemu_an500" not in NAMES:
        pytest.skip("boards/qemu_an500.toml not present")
    region = raw("qemu_an500")["weights"]["size"]
    hf, _ = build_model("mixtral", seed=5, vocab_size=32768, hidden_size=64)
    save_checkpoint(hf, tmp_path / "hf")
    image = convert(tmp_path / "hf", tmp_path / "out", context=16, progress=False).image_path
    assert image.stat().st_size > region
    assert image_main([str(image), "--board", "qemu_an500", "-o", str(tmp_path / "w.hex"), "-q"]) == 1
    assert f"holds only {region} bytes" in capsys.readouterr().err
    (tmp_path / "board_config.h").write_text(config_header(load("qemu_an500")))
    done = compile_c(BOTH_HEADERS, [tmp_path, image.parent], tmp_path)
    assert "static assertion failed: \"model image larger than the board" in done.stderr
