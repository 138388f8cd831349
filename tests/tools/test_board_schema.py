"""One schema for every field of a board file (board_schema.FIELDS), checked
through the command line (issue 25, item 8): for every field a wrong type and
a value out of range are an error naming the file and the field, exit status
not 0, never a traceback; a field only a port reads is refused by that port's
generator. docs/boards.md's table "Every field" is the schema's, row for row."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from colibri_tools.board import board_cli, board_schema, port_aarch64, port_cortex_m, port_trustzone
from colibri_tools.board.board_schema import FIELDS, Field
from colibri_tools.board.flash_backends import PLANNERS

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BASE = "qemu_virt_a72"      # has [slots], [uart], [ticks], [interrupts], [emulate]
OWNER_BASE = {"port_cortex_m": "stm32h747i_disco", "port_aarch64": "qemu_virt_a72",
              "port_trustzone": "qemu_an547"}
OWNER_MAIN = {"port_cortex_m": port_cortex_m.main, "port_aarch64": port_aarch64.main,
              "port_trustzone": lambda argv: port_trustzone.main(["header", *argv])}

WRONG_TYPE = {"integer": "12", "number": "fast", "string": 7, "boolean": "yes",
              "list of strings": 7, "string or list of strings": 7, "table": 7}

# A value out of range for every field that has a range (a new field needs one here).
OUT_OF_RANGE: dict[str, Any] = {
    "name": "Bad-Name", "description": "two\nlines", "arch": "riscv64", "cpu": "Cortex M7!",
    "port": "rtos", "cross_prefix": "../../evil ", "cflags": ["-mcpu=cortex-a72", "$(shell id)"],
    "ldflags": ["-O2 -g"], "kernels": ["no_such_table"], "zephyr_board": "two words",
    "[memory.code] origin": -1, "[memory.code] length": 0,
    "[memory.ram] origin": -1, "[memory.ram] length": 0,
    "[stacks] thread": 24, "[stacks] handler": 0, "[stacks] main": 1 << 32, "[stacks] irq": -16,
    "[weights] address": -4096, "[weights] size": 0, "[weights] alignment": 48,
    "[weights] bandwidth": 0, "[weights] bandwidth_source": "a\nb",
    "[slots] origin": -1, "[slots] length": 0, "[slots] sector": 1000, "[slots] store": "a b",
    "[uart] kind": "16550", "[uart] base": -1, "[uart] clock_hz": 0, "[uart] baud": 0,
    "[uart] irq": 1020, "[uart] tx": "PZ9", "[uart] rx": "PA16", "[uart] af": 16,
    "[ticks] source": "rtc", "[ticks] hz": 1 << 32, "[ticks] unit": 'a "quoted" word',
    "[cortex_m] clocks": "turbo", "[cortex_m] weights_ready": "maybe",
    "[cortex_m.mpu_guard]": {"origin": 0x90000000, "length": 0x04000000},
    "[cortex_m.mpu_guard] origin": -1, "[cortex_m.mpu_guard] length": -1,
    "[interrupts] controller": "gicv3", "[interrupts] distributor": 0x08000100,
    "[interrupts] cpu_interface": 0x08010100, "[interrupts] timer_irq": 33,
    "[emulate] qemu": "qemu system", "[emulate] machine": "a b", "[emulate] cpu": "a'b",
    "[emulate] memory": "lots", "[emulate] extra": ["a\nb"], "[emulate] slots_drive": "a b",
    "[flash] method": "jlink", "[flash] backends": ["qemu", "jlink"],
    "[flash] weights_memory": "psram", "[flash] pyocd_target": "a b", "[flash] pyocd_pack": "a\nb",
    "[flash] pyocd_script": "a\nb", "[flash] openocd_config": ["a\nb"],
    "[flash] openocd_qspi_bank": "a b", "[flash] openocd_external": "a\nb",
    "[flash] openocd_start": ["a\nb"], "[flash] west_runner": "a b",
    "[flash] west_weights_args": ["a\nb"], "[flash] cubeprogrammer_external_loader": "a\nb",
    "[flash] path": "a\nb", "[flash] host": "a b", "[flash] firmware_address": -1,
    "[flash] weights_address": -1,
    "[trustzone.nsc]": {"origin": 0x41000, "length": 0x1000},
    "[trustzone.ns_code]": {"origin": 0x3F000, "length": 0x41000},
    "[trustzone.ns_ram]": {"origin": 0x21000000, "length": 0x1000},
    "[trustzone.nsc] origin": 0x3F010, "[trustzone.nsc] length": 0,
    "[trustzone.ns_code] origin": -1, "[trustzone.ns_code] length": 0x10,
    "[trustzone.ns_ram] origin": 1 << 32, "[trustzone.ns_ram] length": 0,
}


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    return "[" + ", ".join(_value(x) for x in v) + "]"


def toml_text(data: dict, prefix: tuple[str, ...] = ()) -> str:
    """A parsed board file written back (scalars, lists of scalars, tables)."""
    lines = [f"{k} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for key, table in ((k, v) for k, v in data.items() if isinstance(v, dict)):
        lines += [f"[{'.'.join((*prefix, key))}]", toml_text(table, (*prefix, key))]
    return "\n".join(lines) + "\n"


def _base_name(field: Field) -> str:
    return OWNER_BASE[field.owner.split(",")[0]] if field.owner else DEFAULT_BASE


def board_with(tmp_path: Path, base: str, path: tuple[str, ...], value: Any = None,
               delete: bool = False) -> Path:
    data = copy.deepcopy(tomllib.loads((REPO / "boards" / f"{base}.toml").read_text()))
    table = data
    for key in path[:-1]:
        table = table.setdefault(key, {})
    if delete:
        del table[path[-1]]
    else:
        table[path[-1]] = value
    out = tmp_path / f"{base}.toml"
    out.write_text(toml_text(data))
    return out


def colibri_board(capsys, *argv: str) -> tuple[int, str]:
    """colibri-board in this process: an exception escaping main() is a traceback."""
    status = board_cli.main(list(argv))
    return status, capsys.readouterr().err


def test_the_writer_round_trips_every_board(tmp_path):
    for base in sorted(p.stem for p in (REPO / "boards").glob("*.toml")):
        data = tomllib.loads((REPO / "boards" / f"{base}.toml").read_text())
        assert tomllib.loads(toml_text(data)) == data, base


@pytest.mark.parametrize("field", FIELDS, ids=[f.label for f in FIELDS])
def test_wrong_type_is_an_error_naming_the_field(field, tmp_path, capsys):
    path = board_with(tmp_path, _base_name(field), field.path, WRONG_TYPE[field.kind])
    status, err = colibri_board(capsys, "show", str(path))
    words = board_schema.KINDS[field.kind][1]
    assert status == 1 and f"{path}: {field.label} = " in err and f"must be {words}" in err, err


RANGED = [f for f in FIELDS if f.rule is not None and f.rule.text != "true or false"]


def test_every_ranged_field_has_an_out_of_range_case():
    assert set(OUT_OF_RANGE) == {f.label for f in RANGED}


@pytest.mark.parametrize("field", RANGED, ids=[f.label for f in RANGED])
def test_out_of_range_is_an_error_naming_the_field(field, tmp_path, capsys):
    path = board_with(tmp_path, _base_name(field), field.path, OUT_OF_RANGE[field.label])
    if field.owner:     # the port's generator refuses it: the firmware build stops there
        for owner in field.owner.split(", "):
            path = board_with(tmp_path, OWNER_BASE[owner], field.path, OUT_OF_RANGE[field.label])
            assert OWNER_MAIN[owner]([str(path)]) == 1
            err = capsys.readouterr().err
            assert str(path) in err and field.path[-1] in err, err
        return
    status, err = colibri_board(capsys, "show", str(path))
    assert status == 1 and f"{path}: {field.label} = " in err, err
    assert f"must be {field.rule.text}" in err, err


REQUIRED = [f for f in FIELDS if not f.owner and f.required in ("yes", "bare-metal ports")]


@pytest.mark.parametrize("field", REQUIRED, ids=[f.label for f in REQUIRED])
def test_a_missing_required_field_is_named(field, tmp_path, capsys):
    base = "qemu_an547" if field.path[0] == "memory" else DEFAULT_BASE
    path = board_with(tmp_path, base, field.path, delete=True)
    status, err = colibri_board(capsys, "show", str(path))
    assert status == 1 and "missing" in err and field.path[-1] in err, err


# ---- the two cases of the issue, through every colibri-board command, as a process ------

ISSUE_CASES = [(("ldflags",), 7, "ldflags = 7: must be a list of strings"),
               (("uart", "baud"), 0, "[uart] baud = 0: must be 300..12000000")]
COMMANDS = [["list"], ["show"], ["ld"], ["make"], ["header"], ["fit", "no_such_model"]]


@pytest.mark.parametrize("key, value, message", ISSUE_CASES, ids=["ldflags=7", "baud=0"])
def test_issue_cases_fail_cleanly_in_every_command(key, value, message, tmp_path):
    path = board_with(tmp_path, "stm32h747i_disco", key, value)
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"), COLIBRI_BOARDS=str(tmp_path))
    for command in COMMANDS:
        argv = command[:1] + ([str(path)] if command != ["list"] else []) + command[1:]
        done = subprocess.run([sys.executable, "-m", "colibri_tools.board.board_cli", *argv],
                              env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode != 0, (command, done.stdout)
        assert "Traceback" not in done.stderr and message in done.stderr, (command, done.stderr)
        assert str(path) in done.stderr


# ---- one source for each fact ------------------------------------------------------------

def test_docs_table_is_the_schema():
    lines = (REPO / "docs" / "boards.md").read_text().splitlines()
    start = lines.index("### Every field: type, required, range")
    first = next(i for i, ln in enumerate(lines) if i > start and ln.startswith("|"))
    table = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        table.append(line)
    assert table == board_schema.doc_table().splitlines(), (
        "docs/boards.md 'Every field' differs from board_schema.FIELDS: paste the output of "
        "python -m colibri_tools.board.board_schema")


def test_schema_choices_match_the_code_that_uses_them():
    by_label = {f.label: f for f in FIELDS}
    assert set(board_schema.FLASH_BACKENDS) == set(PLANNERS)
    for label, names in (("[uart] kind", [*port_cortex_m.UART_DRIVERS, "pl011"]),
                         ("[cortex_m] clocks", port_cortex_m.CLOCKS),
                         ("[cortex_m] weights_ready", port_cortex_m.WEIGHTS_READY),
                         ("[interrupts] controller", port_aarch64.GIC_KINDS)):
        assert all(name in by_label[label].rule.text for name in names), label
    assert {f.path[-1] for f in FIELDS if f.path[0] == "stacks" and len(f.path) == 2} == {
        key for keys in board_schema.PORT_STACKS.values() for key, _, _ in keys}
    assert {f.kind for f in FIELDS} <= set(board_schema.KINDS)
    # parents come before their keys: check_fields relies on it
    seen: set[tuple[str, ...]] = set()
    for f in FIELDS:
        assert len(f.path) == 1 or f.path[:-1] in seen, f.label
        seen.add(f.path)
