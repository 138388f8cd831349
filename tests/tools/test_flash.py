"""colibri-flash: the commands for every board and backend come from the board
file; inputs that do not fit are refused before anything runs; missing tools
and missing external-flash loaders are named; the run path works end to end
with stand-in probe tools that read back what they were given.

Expected values are read here from the board TOML files with tomllib, not
through colibri_tools.board.boards.
"""

from __future__ import annotations

import os
import shlex
import struct
import sys
import tomllib
from pathlib import Path

import pytest
from board_files import write_board
from colibri_tools.board.boards import BOARDS_DIR, board_names, load
from colibri_tools.board.flash import main, plan_flash, run_plan, supported_backends
from colibri_tools.board.flash_backends import FlashError
from colibri_tools.board.hex_image import build_hex
from colibri_tools.converter.convert import convert
from colibri_tools.errors import ColibriError
from hf_models import build_model, save_checkpoint


def make_elf64(path: Path, segments: list[tuple[int, bytes]], entry: int = 0) -> Path:
    """A minimal little-endian AArch64 ELF64 with one PT_LOAD per (address, bytes)."""
    n = len(segments)
    header = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + bytes(9), 2, 183, 1,
                         entry, 64, 0, 0, 64, 56, n, 64, 0, 0)
    tables, blobs, offset = b"", b"", 64 + 56 * n
    for address, blob in segments:
        tables += struct.pack("<IIQQQQQQ", 1, 5, offset, address, address, len(blob), len(blob), 8)
        blobs += blob
        offset += len(blob)
    path.write_bytes(header + tables + blobs)
    return path


def make_elf(path: Path, segments: list[tuple[int, bytes]], entry: int = 0) -> Path:
    """A minimal little-endian ARM ELF32 with one PT_LOAD per (address, bytes)."""
    n = len(segments)
    header = struct.pack("<16sHHIIIIIHHHHHH", b"\x7fELF\x01\x01\x01" + bytes(9), 2, 40, 1, entry,
                         52, 0, 0, 52, 32, n, 40, 0, 0)
    tables, blobs, offset = b"", b"", 52 + 32 * n
    for address, blob in segments:
        tables += struct.pack("<8I", 1, offset, address, address, len(blob), len(blob), 5, 4)
        blobs += blob
        offset += len(blob)
    path.write_bytes(header + tables + blobs)
    return path


def stm32_board(folder: Path, name: str, *, weights: int = 0x90000000, keys: str = "",
                backends: str = '["pyocd", "openocd", "west"]') -> Path:
    return write_board(folder, name, address=weights, size=0x100000, code_length=0x100000,
                       extra=f"""[flash]
method = "pyocd"
backends = {backends}
pyocd_target = "stm32h747xihx"
openocd_config = "board/stm32h747i-disco.cfg"
{keys}""")


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("flash_model")
    hf, _ = build_model("olmoe", seed=2)
    save_checkpoint(hf, d / "hf")
    return convert(d / "hf", d / "out", context=32, progress=False).image_path


def commands(text: str) -> list[list[str]]:
    return [shlex.split(line) for line in text.splitlines() if line and not line.startswith("#")]


# ---- every board in boards/, every backend it supports -------------------------------

def board_backends() -> list:
    params = []
    for path in sorted(BOARDS_DIR.glob("*.toml")):
        try:
            backends = supported_backends(load(path.stem))
        except ColibriError as exc:   # reported by test_boards.py; keep the others running
            params.append(pytest.param(path.stem, None, id=path.stem, marks=pytest.mark.skip(
                reason=f"does not load: {exc}")))
            continue
        for backend in backends:
            params.append(pytest.param(path.stem, backend, id=f"{path.stem}-{backend}"))
    return params or [pytest.param(None, None, marks=pytest.mark.skip(reason="boards/ is empty"))]


def _firmware_for(raw: dict, tmp_path: Path) -> Path:
    code = raw.get("memory", {}).get("code", {}).get("origin", 0x400000)
    writer = make_elf64 if raw["arch"] == "aarch64" else make_elf
    return writer(tmp_path / "fw.elf", [(code, bytes(range(64)))], entry=code)


def _check_qemu(argv: list[str], raw: dict, model: Path, fw: Path) -> None:
    emulate = raw["emulate"]
    assert argv[0] == emulate["qemu"]
    assert argv[argv.index("-M") + 1] == emulate["machine"]
    if "memory" in emulate:
        assert argv[argv.index("-m") + 1] == emulate["memory"]
    assert argv[argv.index("-kernel") + 1] == str(fw)
    assert f"loader,file={model},addr=0x{raw['weights']['address']:X},force-raw=on" in argv
    extra = emulate.get("extra", [])
    assert argv[argv.index("-serial") + 2:argv.index("-serial") + 2 + len(extra)] == extra or \
        all(a in argv for a in extra)


def _check_pyocd(cmds: list[list[str]], raw: dict, model: Path, fw: Path) -> None:
    target = raw["flash"]["pyocd_target"]
    assert all(c[0] in ("pyocd", "colibri-image") for c in cmds)
    assert all(c[c.index("-t") + 1] == target for c in cmds if c[0] == "pyocd")
    write = next(c for c in cmds if c[-1] == str(model))
    assert write[write.index("--base-address") + 1] == f"0x{raw['weights']['address']:08X}"
    assert cmds[-1][-1] == str(fw)


def _check_openocd(cmds: list[list[str]], raw: dict, model: Path, fw: Path) -> None:
    configs = raw["flash"]["openocd_config"]
    configs = [configs] if isinstance(configs, str) else configs
    (c,) = cmds
    assert c[0] == "openocd" and [c[i + 1] for i, a in enumerate(c) if a == "-f"] == configs
    programs = [c[i + 1] for i, a in enumerate(c) if a == "-c" and c[i + 1].startswith("program")]
    assert programs == [f"program {model} verify 0x{raw['weights']['address']:08X}",
                        f"program {fw} verify"]
    assert c[-2:] == ["-c", "shutdown"]


def _check_west_runner(cmds: list[list[str]], raw: dict) -> None:
    runner = raw["flash"].get("west_runner")
    west = [c for c in cmds if c[0] == "west"]
    if runner:
        assert all(c[c.index("-r") + 1] == runner for c in west)
    weights = next(c for c in west if "--hex-file" in c)
    assert weights[-len(raw["flash"]["west_weights_args"]):] == raw["flash"]["west_weights_args"]
    assert west[-1] == west[0][:west[0].index("--skip-rebuild")]    # then the firmware build


def _check_cubeprogrammer(cmds: list[list[str]], raw: dict, model: Path, fw: Path) -> None:
    """STM32_Programmer_CLI as Zephyr's runner calls it: --connect, the
    external loader (-el) for QSPI weights, --download FILE [address], --verify,
    the firmware last with --start."""
    weights, firmware = cmds
    assert weights[:3] == ["STM32_Programmer_CLI", "--connect", "port=swd reset=HWrst"]
    loader = weights[weights.index("-el") + 1]
    assert loader.endswith("ExternalLoader/" + raw["flash"]["cubeprogrammer_external_loader"])
    assert weights[weights.index("--download") + 1:] == [
        str(model), f"0x{raw['weights']['address']:08X}", "--verify"]
    assert firmware[3:] == ["--download", str(fw), "--verify", "--start"]


def _external(raw: dict) -> bool:
    memory = raw.get("flash", {}).get("weights_memory")
    w = raw["weights"]
    return memory == "external" if memory else w["address"] + w["size"] > 0x20000000


@pytest.mark.parametrize("name, backend", board_backends())
def test_dry_run_for_every_board_and_backend(name, backend, model, tmp_path, capsys):
    raw = tomllib.loads((BOARDS_DIR / f"{name}.toml").read_text())
    fw = _firmware_for(raw, tmp_path)
    args = ["--board", name, "--backend", backend, "--weights", str(model), "--dry-run"]
    args += ["--host", "pi@board.example"] if backend == "scp" else []
    args += ["--build-dir", str(tmp_path / "zephyr")] if backend == "west" else ["--firmware", str(fw)]
    if backend == "pyocd" and _external(raw) and "pyocd_script" not in raw["flash"]:
        # The board keeps its weights where pyOCD has no flash algorithm: the
        # refusal must say so; the firmware alone still goes through pyOCD.
        assert main(args) == 1
        assert "external flash" in capsys.readouterr().err
        args.remove("--weights")
        args.remove(str(model))
        assert main(args) == 0, capsys.readouterr().err
        assert commands(capsys.readouterr().out) == [
            ["pyocd", "flash", "-t", raw["flash"]["pyocd_target"], str(fw)]]
        return
    assert main(args) == 0, capsys.readouterr().err
    cmds = commands(capsys.readouterr().out)
    assert cmds
    if backend == "qemu":
        _check_qemu(cmds[0], raw, model, fw)
    elif backend == "pyocd":
        _check_pyocd(cmds, raw, model, fw)
    elif backend == "openocd":
        _check_openocd(cmds, raw, model, fw)
    elif backend == "west":
        assert all(c[:4] == ["west", "flash", "--build-dir", str(tmp_path / "zephyr")]
                   for c in cmds if c[0] == "west")
        _check_west_runner(cmds, raw)
    elif backend == "stm32cubeprogrammer":
        _check_cubeprogrammer(cmds, raw, model, fw)
    elif backend == "scp":
        assert "host" not in raw["flash"]          # no board file fixes one: --host gives it
        target = f"pi@board.example:{raw['flash']['path']}/"
        assert [str(model), str(fw), target] == next(c for c in cmds if c[0] == "scp")[1:]


# ---- synthetic boards: internal and external flash -----------------------------------------

def test_external_weights_without_a_loader_are_refused_clearly(model, tmp_path):
    board = stm32_board(tmp_path, "disco")
    for backend, key in (("pyocd", "pyocd_script"), ("openocd", "openocd_qspi_bank"),
                         ("west", "west_weights_args")):
        with pytest.raises(FlashError, match=rf"external flash at 0x90000000\.\.0x900FFFFF.*"
                                             rf"\[flash\] {key}"):
            plan_flash(board, backend=backend, weights=model, build_dir=tmp_path)


def test_external_weights_with_loaders(model, tmp_path, capsys):
    script = tmp_path / "qspi_user.py"
    script.write_text("def will_connect():\n    pass\n")
    board = stm32_board(tmp_path, "disco", keys=f"""pyocd_script = "{script.name}"
openocd_external = ["set QUADSPI 1"]
west_runner = "openocd"
west_weights_args = []""")
    fw = make_elf(tmp_path / "fw.elf", [(0x08000000, b"\x00" * 32)])
    assert main(["--board", str(board), "--weights", str(model), "--firmware", str(fw),
                 "--dry-run", "--work-dir", str(tmp_path / "w")]) == 0
    cmds = commands(capsys.readouterr().out)
    size = model.stat().st_size
    assert cmds == [
        ["pyocd", "flash", "-t", "stm32h747xihx", "--script", str(script), "--base-address",
         "0x90000000", "--format", "bin", "--no-reset", str(model)],
        ["pyocd", "commander", "-t", "stm32h747xihx", "--script", str(script), "-c",
         f"savemem 0x90000000 {size} {tmp_path / 'w' / 'weights.readback'}"],
        ["colibri-image", "--check", str(tmp_path / "w" / "weights.readback"), "--board",
         str(board), "--model", str(model)],
        ["pyocd", "flash", "-t", "stm32h747xihx", str(fw)],
    ]
    assert main(["--board", str(board), "--backend", "openocd", "--weights", str(model),
                 "--firmware", str(fw), "--dry-run"]) == 0
    assert commands(capsys.readouterr().out) == [
        ["openocd", "-c", "set QUADSPI 1", "-f", "board/stm32h747i-disco.cfg",
         "-c", f"program {model} verify 0x90000000", "-c", f"program {fw} verify",
         "-c", "reset init", "-c", "resume", "-c", "shutdown"]]
    assert main(["--board", str(board), "--backend", "west", "--weights", str(model),
                 "--build-dir", str(tmp_path / "zb"), "--dry-run", "--work-dir",
                 str(tmp_path / "w")]) == 0
    hex_path = str(tmp_path / "w" / "weights.hex")
    assert commands(capsys.readouterr().out) == [
        ["colibri-image", str(model), "--board", str(board), "-o", hex_path],
        ["west", "flash", "--build-dir", str(tmp_path / "zb"), "-r", "openocd", "--skip-rebuild",
         "--hex-file", hex_path],
        ["west", "flash", "--build-dir", str(tmp_path / "zb"), "-r", "openocd"],
    ]


def test_internal_flash_needs_no_loader_and_takes_a_hex(model, tmp_path, capsys):
    board = stm32_board(tmp_path, "nucleo", weights=0x08100000)
    weights = tmp_path / "weights.hex"
    build_hex(model, load(board), weights)
    assert main(["--board", str(board), "--backend", "openocd", "--weights", str(weights),
                 "--dry-run"]) == 0
    assert commands(capsys.readouterr().out) == [
        ["openocd", "-f", "board/stm32h747i-disco.cfg", "-c", f"program {weights} verify",
         "-c", "reset run", "-c", "shutdown"]]
    assert main(["--board", str(board), "--weights", str(weights), "--dry-run", "--no-verify"]) == 0
    assert commands(capsys.readouterr().out) == [
        ["pyocd", "flash", "-t", "stm32h747xihx", "--format", "hex", "--no-reset", str(weights)]]


def test_inputs_that_do_not_fit_are_refused_before_anything_runs(model, tmp_path, capsys):
    board = stm32_board(tmp_path, "disco", weights=0x08100000)
    intruder = make_elf(tmp_path / "bad.elf", [(0x08000000, b"\x00" * 16),
                                               (0x08100100, b"\x01" * 16)])
    with pytest.raises(ColibriError, match=r"bad.elf segment 1 writes 0x08100100\.\.0x0810010F, "
                                         r"inside board disco's weight region"):
        plan_flash(board, weights=model, firmware=intruder)
    small = stm32_board(tmp_path, "tiny", keys="", weights=0x08100000)
    small.write_text(small.read_text().replace("size = 0x100000", "size = 0x1000"))
    assert main(["--board", str(small), "--weights", str(model), "--dry-run"]) == 1
    assert "holds only 4096 bytes" in capsys.readouterr().err
    assert main(["--board", str(board), "--backend", "qemu", "--weights", str(model),
                 "--dry-run"]) == 1
    assert "does not support the qemu backend (it supports: pyocd, openocd, west)" in \
        capsys.readouterr().err


def test_a_model_whose_data_crc_is_wrong_is_refused_before_anything_runs(model, tmp_path,
                                                                        capsys):
    """One weight byte changed (its tensor's CRC-32 left as it was): header and
    tables pass, colibri_verify on the device would not; colibri-flash runs
    that check first, on bare-metal and Linux boards (issue 25)."""
    data = bytearray(model.read_bytes())
    data[-100] ^= 1
    bad = tmp_path / "bad.bin"
    bad.write_bytes(bytes(data))
    board = stm32_board(tmp_path, "disco", weights=0x08100000)
    for target in (str(board), "rpi4"):
        assert main(["--board", target, "--weights", str(bad), "--host", "pi@h", "--dry-run"]) == 1
        assert f"{bad}: COLIBRI_E_CHECKSUM: tensor #" in capsys.readouterr().err


def test_missing_tool_is_named_with_how_to_install(model, tmp_path, monkeypatch, capsys):
    board = stm32_board(tmp_path, "nucleo", weights=0x08100000)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["--board", str(board), "--weights", str(model)]) == 1
    err = capsys.readouterr().err
    assert "pyocd not found" in err and "pip install pyocd" in err
    assert main(["--board", str(board), "--backend", "openocd", "--weights", str(model)]) == 1
    assert "openocd not found: install it with: apt-get install openocd" in capsys.readouterr().err


# ---- the run path, with stand-in tools -------------------------------------------------

FAKE_PYOCD = """#!{python}
# Stand-in for pyocd: logs its arguments; `flash` keeps the file it was given
# (a bin at --base-address), `commander -c "savemem A N F"` writes those bytes
# back, with one bit flipped if FAKE_CORRUPT is set.
import os, shlex, sys
from pathlib import Path
state = Path(os.environ["FAKE_STATE"])
with open(state / "log", "a") as log:
    log.write(shlex.join(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
if args[0] == "flash" and "--base-address" in args:
    (state / "flashed").write_bytes(Path(args[-1]).read_bytes())
if args[0] == "commander":
    _, address, size, out = args[args.index("-c") + 1].split()
    data = bytearray((state / "flashed").read_bytes()[:int(size)])
    if os.environ.get("FAKE_CORRUPT"):
        data[100] ^= 1
    Path(out).write_bytes(bytes(data))
"""


@pytest.fixture
def fake_pyocd(tmp_path, monkeypatch) -> Path:
    bindir, state = tmp_path / "bin", tmp_path / "state"
    bindir.mkdir()
    state.mkdir()
    tool = bindir / "pyocd"
    tool.write_text(FAKE_PYOCD.format(python=sys.executable))
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_STATE", str(state))
    return state


def test_run_writes_reads_back_and_compares(model, tmp_path, fake_pyocd, capsys):
    board = stm32_board(tmp_path, "nucleo", weights=0x08100000)
    fw = make_elf(tmp_path / "fw.elf", [(0x08000000, b"\x00" * 32)])
    assert main(["--board", str(board), "--weights", str(model), "--firmware", str(fw),
                 "--work-dir", str(tmp_path / "work")]) == 0
    out = capsys.readouterr().out
    assert f"bytes at 0x08100000 match {model.name}" in out
    log = (fake_pyocd / "log").read_text().splitlines()
    assert [line.split()[0] for line in log] == ["flash", "commander", "flash"]
    assert (fake_pyocd / "flashed").read_bytes() == model.read_bytes()


def test_run_stops_when_the_readback_differs(model, tmp_path, fake_pyocd, monkeypatch, capsys):
    board = stm32_board(tmp_path, "nucleo", weights=0x08100000)
    fw = make_elf(tmp_path / "fw.elf", [(0x08000000, b"\x00" * 32)])
    monkeypatch.setenv("FAKE_CORRUPT", "1")
    assert main(["--board", str(board), "--weights", str(model), "--firmware", str(fw),
                 "--work-dir", str(tmp_path / "work")]) == 1
    assert "byte at 0x08100064" in capsys.readouterr().err
    log = (fake_pyocd / "log").read_text().splitlines()
    assert [line.split()[0] for line in log] == ["flash", "commander"]   # firmware not flashed


def test_plan_is_data(model, tmp_path):
    board = stm32_board(tmp_path, "nucleo", weights=0x08100000)
    plan = plan_flash(board, weights=model, verify=False)
    assert plan.backend == "pyocd" and len(plan.steps) == 1
    assert plan.steps[0].tool == "pyocd"
    with pytest.raises(FlashError, match="nothing to do"):
        plan_flash(board)
    with pytest.raises(FlashError, match="give --build-dir"):
        plan_flash(board, backend="west", weights=model)
    assert callable(run_plan)


def test_scp_needs_a_host(model, tmp_path, capsys):
    fw = make_elf64(tmp_path / "colibri-run", [(0x400000, bytes(64))], entry=0x400000)
    args = ["--board", "rpi4", "--weights", str(model), "--firmware", str(fw), "--dry-run"]
    assert main(args) == 1
    assert "give --host user@address" in capsys.readouterr().err
    assert main([*args, "--host=-oProxyCommand=x"]) == 1
    assert "is not user@address" in capsys.readouterr().err
    assert main([*args, "--host", "me@10.0.0.7"]) == 0
    assert "me@10.0.0.7:/home/pi/colibri/" in capsys.readouterr().out


def test_stm32_boards_have_a_west_and_a_cubeprogrammer_method():
    """Issue 12: an STM32 board flashed through west (Zephyr's
    stm32cubeprogrammer runner) and through STM32CubeProgrammer itself."""
    uses_west = [n for n in board_names() if load(n).flash.get("method") == "west"]
    assert "stm32h750b_dk" in uses_west
    for name in ("stm32h747i_disco", "stm32h750b_dk"):
        assert {"west", "stm32cubeprogrammer"} <= set(supported_backends(load(name)))
        assert load(name).flash["west_runner"] == "stm32cubeprogrammer"
