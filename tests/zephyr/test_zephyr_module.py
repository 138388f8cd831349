"""The Zephyr module's files, checked without Zephyr: module.yml points at
the build files, every Kconfig option explains itself, every sample has what
twister and `west build` need, and each board's devicetree weights region
agrees with the board file in boards/ (address, size, alignment), so the
firmware's address and the address colibri-flash writes the HEX to cannot
disagree."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from zephyr_helpers import REPO

yaml = pytest.importorskip("yaml", reason="PyYAML (installed with transformers) reads module.yml")

PORT = REPO / "ports" / "zephyr"
DTS = PORT / "dts" / "colibri"
SAMPLES = ["hello_moe", "serial_runner", "isr_forward"]
# Board target (overlay file name) -> devicetree fragment, board file in boards/.
BOARDS = {
    "mps3_corstone300_an547": ("mps3_corstone300_an547.dtsi", "qemu_an547"),
    "mps2_an385": ("mps2_an385.dtsi", None),
    "native_sim_native_64": ("native_sim.dtsi", None),
    "stm32h747i_disco_stm32h747xx_m7": ("stm32h747i_disco_m7.dtsi", "stm32h747i_disco"),
    "stm32h750b_dk": ("stm32h750b_dk.dtsi", "stm32h750b_dk"),
}
SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def dtsi_region(path: Path) -> tuple[int, int]:
    """(address, size) of the one `reg = <ADDR DT_SIZE_x(N)>` in a fragment."""
    regs = re.findall(r"reg = <(0x[0-9a-fA-F]+) DT_SIZE_([KMG])\((\d+)\)>;", path.read_text())
    assert len(regs) == 1, f"{path}: expected one weights reg, found {regs}"
    address, unit, count = regs[0]
    return int(address, 16), int(count) * SIZE_UNITS[unit]


def test_module_yml_points_at_the_build_files():
    meta = yaml.safe_load((REPO / "zephyr" / "module.yml").read_text())
    assert meta["name"] == "colibri"
    assert (REPO / meta["build"]["cmake"] / "CMakeLists.txt").is_file()
    assert (REPO / meta["build"]["kconfig"]).is_file()
    dts_root = REPO / meta["build"]["settings"]["dts_root"]
    assert (dts_root / "dts" / "bindings" / "colibri,weights.yaml").is_file()
    for folder in meta["samples"] + meta["tests"]:
        assert (REPO / folder).is_dir()


def test_every_kconfig_option_has_help():
    text = (PORT / "Kconfig").read_text()
    entries = re.split(r"^(?=(?:menu)?config |choice )", text, flags=re.M)[1:]
    assert len(entries) > 10
    for entry in entries:
        name = entry.split()[1]
        assert re.search(r"^\thelp\n\t  \S", entry, re.M), f"{name} has no help text"


def test_binding_requires_reg():
    binding = yaml.safe_load((PORT / "dts" / "bindings" / "colibri,weights.yaml").read_text())
    assert binding["compatible"] == "colibri,weights"
    assert binding["properties"]["reg"]["required"] is True


@pytest.mark.parametrize("sample", SAMPLES)
def test_sample_has_what_west_and_twister_need(sample):
    root = REPO / "samples" / "zephyr" / sample
    for name in ("CMakeLists.txt", "prj.conf", "sample.yaml"):
        assert (root / name).is_file(), f"{sample}: {name} missing"
    meta = yaml.safe_load((root / "sample.yaml").read_text())
    assert meta["tests"] and all(t.startswith("sample.colibri.") for t in meta["tests"])
    assert "CONFIG_COLIBRI=y" in (root / "prj.conf").read_text().split()
    for board, (fragment, _) in BOARDS.items():
        overlay = root / "boards" / f"{board}.overlay"
        assert overlay.is_file(), f"{sample}: no overlay for {board}"
        assert f"#include <colibri/{fragment}>" in overlay.read_text()


def test_ztest_suite_runs_on_both_emulated_targets():
    meta = yaml.safe_load((REPO / "tests" / "zephyr" / "colibri_core" / "testcase.yaml").read_text())
    platforms = meta["common"]["integration_platforms"]
    assert {"native_sim/native/64", "mps3/corstone300/an547"} <= set(platforms)


@pytest.mark.parametrize("board", list(BOARDS))
def test_weights_region_is_aligned(board):
    address, size = dtsi_region(DTS / BOARDS[board][0])
    assert address % 4096 == 0 and size % 4096 == 0


@pytest.mark.parametrize("board", [b for b, (_, toml) in BOARDS.items() if toml])
def test_weights_region_agrees_with_the_board_file(board):
    fragment, toml_name = BOARDS[board]
    board_file = REPO / "boards" / f"{toml_name}.toml"
    if not board_file.is_file():
        pytest.skip(f"{board_file} not there")
    weights = tomllib.loads(board_file.read_text())["weights"]
    address, size = dtsi_region(DTS / fragment)
    assert (address, size) == (weights["address"], weights["size"]), (
        f"{fragment} says 0x{address:X}+0x{size:X}, {board_file.name} says "
        f"0x{weights['address']:X}+0x{weights['size']:X}")
    assert address % weights["alignment"] == 0


def test_stm32h7_weights_window_is_readable_and_cached():
    """The QSPI window's MPU attribute: FLASH (normal, cached, read-only), not
    EXTMEM (strongly ordered, no access: the first weight read faults) and not
    IO (device memory: uncached, unaligned accesses fault)."""
    text = (DTS / "stm32h747i_disco_m7.dtsi").read_text()
    assert "zephyr,memory-attr = <DT_MEM_ARM(ATTR_MPU_FLASH)>;" in text
    assert "colibri,weights = &ext_memory;" in text
