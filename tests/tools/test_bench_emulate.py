"""colibri-bench --emulate: the QEMU plugin counts exactly the guest
instructions a run executes (a loop of known length under qemu-aarch64),
refuses a call without its out=
argument, and the benchmark on a tiny model reports per-token counts in
which the rpi4's NEON table does less work than the reference."""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PLUGIN = REPO / "build" / "host" / "qemu-insn.so"
LOOP = "int main(int c, char **v) { long n = c > 1 ? v[1][0] - '0' : 0; n *= 100000;\n" \
       "  __asm__ volatile(\"1: subs %0, %0, #1\\n\\tbne 1b\" : \"+r\"(n) : : \"cc\");\n" \
       "  return 0; }\n"


@pytest.fixture(scope="module")
def plugin():
    for tool in ("qemu-aarch64", "aarch64-linux-gnu-gcc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    done = subprocess.run(["make", "-s", str(PLUGIN.relative_to(REPO))], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return PLUGIN


def _count(plugin, tmp_path, *cmd) -> int:
    out = tmp_path / "count"
    subprocess.run(["qemu-aarch64", "-cpu", "cortex-a72", "-plugin", f"{plugin},out={out}", *cmd],
                   check=True, timeout=60)
    return int(out.read_text())


def test_the_plugin_counts_each_executed_instruction(plugin, tmp_path):
    src, exe = tmp_path / "loop.c", tmp_path / "loop"
    src.write_text(LOOP)
    subprocess.run(["aarch64-linux-gnu-gcc", "-O2", "-static", str(src), "-o", str(exe)],
                   check=True, timeout=120)
    one, three = _count(plugin, tmp_path, str(exe), "1"), _count(plugin, tmp_path, str(exe), "3")
    # the same path but 200,000 more passes of the two-instruction loop
    assert three - one == 2 * 200_000


def test_the_plugin_refuses_a_call_without_out(plugin):
    done = subprocess.run(["qemu-aarch64", "-plugin", str(plugin), "/bin/true"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "out=FILE" in done.stderr


def test_emulate_refuses_what_it_does_not_take(capsys):
    from colibri_tools.bench import bench

    assert bench.main(["--emulate", "rpi4", "--row-groups", "--quant", "int8"]) == 2
    assert "both layouts" in capsys.readouterr().err


def test_emulate_refuses_a_board_without_qemu_user():
    from colibri_tools.bench.bench_emulate import EmulateError, build_colibri
    from colibri_tools.board.boards import load

    with pytest.raises(EmulateError, match="qemu-aarch64"):
        build_colibri(load("qemu_an547"))


def test_a_tiny_model_counts_less_work_with_neon(plugin, tmp_path):
    tiny = ["--vocab", "300", "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads",
            "2", "--experts", "4", "--top-k", "2", "--ffn", "128", "--prompt", "8", "--gen", "4"]
    report_path = tmp_path / "report.json"
    done = subprocess.run([str(REPO / ".venv" / "bin" / "colibri-bench"), "--emulate", "rpi4",
                           "--quant", "int8", "--work", str(tmp_path), "--json", str(report_path),
                           *tiny], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert "qemu-aarch64 -cpu cortex-a72" in done.stdout
    rows = {(r["table"], r["layout"]): r for r in json.loads(report_path.read_text())["rows"]}
    assert set(rows) == {(t, lay) for t in ("neon", "reference") for lay in ("rows", "r16")}
    for layout in ("rows", "r16"):
        neon, reference = rows[("neon", layout)], rows[("reference", layout)]
        assert 0 < neon["decode"] < reference["decode"]
        assert 0 < neon["prompt"] < reference["prompt"]
