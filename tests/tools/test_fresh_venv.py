"""The issue's "Done means", as a user without the repository meets it: a fresh
venv with only the colibri-tools wheel (and the wheels of its runtime
dependencies from the local wheelhouse scripts/setup.sh fills: no torch, no
transformers, nothing from a hub) runs the board list, the converter and
colibri-generate through the engine binding, from a directory outside the
checkout, and never opens a file of the checkout (an audit hook in the venv
records every file and shared library Python opens).

It also asks the planner (`colibri-board fit`) and runs a golden suite on
the emulated AN547 with one command (`colibri-test run --board qemu_an547
--firmware F --weights W`); the firmware is built from the checkout and the
suite written by transformers in this (dev) process, then both are copied
out of the checkout, as a user would receive them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WHEELHOUSE = REPO / ".venv" / "wheelhouse"
PROMPT = "It is a truth universally acknowledged"

AUDIT_PTH = ("import os, sys; log = os.environ.get('COLIBRI_AUDIT_LOG'); "
             "log and sys.addaudithook(lambda e, a, f=open(log, 'a', buffering=1): "
             "e in ('open', 'ctypes.dlopen', 'os.listdir', 'os.scandir') and a and a[0] "
             "is not None and f.write(f'{e} {os.fsdecode(a[0]) if isinstance(a[0], "
             "(str, bytes, os.PathLike)) else a[0]}\\n'))\n")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps",
                           "--no-build-isolation", "-q", "-w", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = out.glob("colibri_tools-*.whl")
    return path


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    if not any(WHEELHOUSE.glob("numpy-*.whl")):
        pytest.skip(f"no wheelhouse at {WHEELHOUSE}: run scripts/setup.sh")
    root = tmp_path_factory.mktemp("fresh") / "venv"
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", str(root)], check=True, timeout=300)
    done = subprocess.run([str(root / "bin" / "pip"), "install", "-q", "--no-index",
                           "--find-links", str(WHEELHOUSE), str(wheel)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (site,) = (root / "lib").glob("python3*/site-packages")
    (site / "zz_colibri_audit.pth").write_text(AUDIT_PTH)
    return root


def _run(venv: Path, cwd: Path, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "COLIBRI_LIB", "COLIBRI_BOARDS", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["COLIBRI_AUDIT_LOG"] = str(cwd / "audit.log")
    done = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    if check:
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done


def test_the_wheel_carries_boards_and_the_engine(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    boards = sorted(p.name for p in (REPO / "boards").glob("*.toml"))
    shipped = sorted(Path(n).name for n in names if "/board_files/" in n and n.endswith(".toml"))
    assert shipped == boards
    assert any(n.endswith("colibri_tools/lib/libcolibri_linux.so.0") for n in names)
    assert any(n.endswith("colibri_tools/lib/libcolibri.so.0") for n in names)
    assert "-py3-none-linux_" in wheel.name  # the libraries make it platform-specific
    # every module of every sub-package (package discovery in setup.py)
    sources = sorted(str(p.relative_to(REPO / "tools"))
                     for p in (REPO / "tools" / "colibri_tools").rglob("*.py"))
    carried = {n[n.index("colibri_tools/"):] for n in names if "colibri_tools/" in n}
    assert sources and set(sources) <= carried, sorted(set(sources) - carried)
    # one copy of each board file in git: the package maps boards/, it holds none itself
    tracked = subprocess.run(["git", "ls-files", "*.toml"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    assert all(t.startswith("boards/") or not t.startswith("tools/") for t in tracked)


def test_fresh_venv_end_to_end(venv, tmp_path):
    work = tmp_path / "user"
    work.mkdir()
    model = work / "tiny_moe"
    shutil.copytree(REPO / "models" / "tiny_moe", model)  # the user's own checkpoint

    listed = _run(venv, work, "colibri-board", "list").stdout.split("\n")
    assert listed[0].split()[:3] == ["board", "arch", "port"]
    assert sorted(line.split()[0] for line in listed[1:] if line) == sorted(
        p.stem for p in (REPO / "boards").glob("*.toml"))
    assert "0x90000000" in _run(venv, work, "colibri-board", "header", "qemu_an547").stdout
    unknown = _run(venv, work, "colibri-board", "show", "nope", check=False)
    assert unknown.returncode == 1 and "known boards: jetson_orin_nano" in unknown.stderr
    assert _run(venv, work, "colibri-convert", "--version").stdout.startswith("colibri-convert ")

    _run(venv, work, "colibri-convert", str(model), "-o", str(work / "out"), "--context", "64")
    done = _run(venv, work, "colibri-generate", str(work / "out"), "--prompt", PROMPT, "--gen",
                "12", "--ignore-eos", "--show-ids", "--threads", "1")
    prompt_ids = done.stderr.split("prompt ids: ")[1].split("\n")[0]
    got = [int(t) for t in done.stderr.split("generated ids: ")[1].split()]
    assert len(got) == 12 and done.stdout.strip()

    where = _run(venv, work, "python", "-c", (
        "import json, colibri_tools, colibri_tools.board.boards as b, colibri_tools.board.flash as f; "
        "from colibri_tools.runtime.engine import Engine; "
        f"e = Engine({str(work / 'out' / 'model.bin')!r}); "
        "print(json.dumps([colibri_tools.__file__, str(b.BOARDS_DIR), e.library_path, "
        "str(f.WORK_ROOT)]))"))
    package, boards, library, flash_work = json.loads(where.stdout)
    for path in (package, boards, library):
        assert path.startswith(str(venv)), path
    assert not flash_work.startswith(str(venv)) and flash_work.endswith("colibri/flash")

    # --board with the packaged board file: the weights as a HEX at the board's address
    _run(venv, work, "colibri-image", str(work / "out" / "model.bin"), "--board", "qemu_an547",
         "-o", str(work / "weights.hex"))
    with open(work / "weights.hex") as hex_file:
        assert hex_file.readline().strip() == ":0200000490006A"  # upper address 0x9000

    # the same tokens as the checkout's colibri-run on the image the venv wrote
    subprocess.run(["make", "-s", "host"], cwd=REPO, check=True, timeout=600)
    direct = subprocess.run([str(REPO / "build" / "host" / "colibri-run"),
                             str(work / "out" / "model.bin"), "--ids",
                             prompt_ids.replace(" ", ","), "--gen", "12"], capture_output=True,
                            text=True, check=True)
    assert got == [int(t) for t in direct.stdout.split()]

    # the planner on the packaged board files, and one command on the emulated AN547
    fit = _run(venv, work, "colibri-board", "fit", "stm32h747i_disco", str(model), "--json",
               check=False)
    report = json.loads(fit.stdout)
    assert fit.returncode == 1 and not report["fits"] and report["largest_context"] < 256
    assert _run(venv, work, "colibri-board", "fit", "qemu_an547", str(work / "out")).returncode == 0
    if shutil.which("qemu-system-arm") is not None:
        _one_command_run(venv, work)

    opened = (work / "audit.log").read_text().splitlines()
    assert any("libcolibri_linux.so.0" in line for line in opened)
    inside = [line for line in opened if str(REPO) in line.split(" ", 1)[1]]
    assert inside == [], inside[:10]


def _one_command_run(venv: Path, work: Path) -> None:
    sys.path.insert(0, str(REPO / "tests" / "tools"))
    from colibri_tools.testing.golden import make_suite, save_suite
    from fw_helpers import firmware

    built = firmware("qemu_an547")            # for the demo model at context 64, like work/out
    shutil.copy(built, work / "firmware.elf")
    suite = make_suite(work / "tiny_moe", [([1, 2, 3], 4)], image=work / "out" / "model.bin")
    save_suite(suite, work / "suite.json")
    done = _run(venv, work, "colibri-test", "run", "--board", "qemu_an547", "--firmware",
                str(work / "firmware.elf"), "--weights", str(work / "out" / "model.bin"),
                str(work / "suite.json"), "--junit", str(work / "junit.xml"), "--limit", "120")
    assert "1 passed, 0 failed" in done.stdout, done.stdout
