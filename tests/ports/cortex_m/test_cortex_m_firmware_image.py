"""Properties of the linked Cortex-M firmware, for every Cortex-M board (the
STM32 boards are built and linked, not run): nothing allocates, the weight
symbols are the board file's, the vector table and sections sit where the
board file says."""
from __future__ import annotations

import struct
import subprocess

import pytest
from cm_helpers import QEMU_BOARDS, STM32_BOARDS, elf_symbols
from colibri_tools.board import boards

ALL_BOARDS = QEMU_BOARDS + STM32_BOARDS
FORBIDDEN = {"malloc", "calloc", "realloc", "free", "_malloc_r", "_free_r", "_calloc_r",
             "_realloc_r", "_sbrk", "_sbrk_r", "sbrk", "printf", "puts", "_write", "_read",
             "abort", "exit", "_exit"}


@pytest.fixture(scope="module", params=ALL_BOARDS)
def linked(request, cm_firmware):
    return boards.load(request.param), cm_firmware(request.param)


def test_no_allocation_or_stdio_linked_in(linked):
    _, firmware = linked
    symbols = elf_symbols(firmware.elf)
    undefined = subprocess.run(["arm-none-eabi-nm", "-u", str(firmware.elf)],
                               capture_output=True, text=True, check=True).stdout.split()
    assert not (set(symbols) | set(undefined)) & FORBIDDEN


def test_weight_symbols_equal_the_board_file(linked):
    board, firmware = linked
    symbols = elf_symbols(firmware.elf)
    assert symbols["__colibri_weights_start"] == board.weights.origin
    assert symbols["__colibri_weights_size"] == board.weights.length
    config = (firmware.directory / "board_config.h").read_text()
    assert f"COLIBRI_BOARD_WEIGHTS_ADDR 0x{board.weights.origin:08X}u" in config


def test_vector_table_and_sections_follow_the_board_file(linked):
    board, firmware = linked
    symbols = elf_symbols(firmware.elf)
    image = (firmware.directory / "firmware.bin").read_bytes()
    initial_sp, reset = struct.unpack_from("<II", image, 0)
    assert symbols["__vectors_start"] == board.code.origin
    assert initial_sp == symbols["__msp_top"]
    assert reset == symbols["Reset_Handler"] | 1  # Thumb
    assert len(image) <= board.code.length
    assert board.ram.origin <= symbols["__stacks_start"]
    assert symbols["__ram_used_end"] <= board.ram.end
    sections = subprocess.run(["arm-none-eabi-readelf", "-SW", str(firmware.elf)],
                              capture_output=True, text=True, check=True).stdout
    for line in sections.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 7 and "A" in parts[7] and int(parts[5], 16) > 0:
            address, size = int(parts[3], 16), int(parts[5], 16)
            inside = [r for r in (board.code, board.ram)
                      if r.origin <= address and address + size <= r.end]
            assert inside, f"section {parts[1]} at 0x{address:X} outside CODE and RAM"


@pytest.mark.parametrize("board_name", STM32_BOARDS)
def test_stm32_firmware_configures_usart_quadspi_check_and_mpu_guard(board_name, cm_firmware):
    firmware = cm_firmware(board_name)
    config = (firmware.directory / "cm_board_config.h").read_text()
    board = boards.load(board_name)
    assert "#define CM_BOARD_UART_DRIVER cm_uart_stm32" in config
    assert "#define CM_BOARD_WEIGHTS_READY cm_weights_stm32h7_quadspi_mapped" in config
    assert "#define CM_BOARD_CLOCKS_INIT cm_clocks_stm32h7_hsi64" in config
    assert "#define CM_BOARD_MPU_GUARD_ADDR 0x90000000u" in config
    assert "#define CM_BOARD_MPU_GUARD_SIZE 0x10000000u" in config
    assert "#define CM_BOARD_SEMIHOSTING 0" in config  # a real board stops, no BKPT
    assert board.weights.origin == 0x90000000 and board.weights.length == 0x08000000
    symbols = elf_symbols(firmware.elf)
    for needed in ("cm_uart_stm32", "cm_weights_stm32h7_quadspi_mapped", "cm_mpu_protect_weights"):
        assert needed in symbols
