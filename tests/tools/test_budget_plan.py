"""The budget planner (bench/budget_plan.py, colibri-plot budget) and the
cache picture (colibri-plot cache): the steady-state hit rate worked out by
hand on a small profile, the budget split equal to the C library's
(colibri_linux_budget_slots, through the engine's ctypes binding) and its
reserve equal to the header's, and the pictures hold the run's numbers."""
from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from colibri_tools.bench import budget_plan, plot
from colibri_tools.bench.budget_plan import Sizes

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]
COUNTS = np.array([[0, 0, 0, 0], [1, 9, 8, 2], [5, 8, 3, 4]])  # layer 0 dense


def test_hit_rate_keeps_each_layers_most_used():
    total = COUNTS.sum()  # 40
    assert budget_plan.hit_rate(COUNTS, 0) == 0.0
    assert budget_plan.hit_rate(COUNTS, 2) == pytest.approx((9 + 8) / total)  # one per layer
    # 3 slots: one each, the third to the layer whose second-best is used more (8 > 5)
    assert budget_plan.hit_rate(COUNTS, 3) == pytest.approx((9 + 8 + 8) / total)
    assert budget_plan.hit_rate(COUNTS, 4) == pytest.approx((9 + 8 + 8 + 5) / total)
    assert budget_plan.hit_rate(COUNTS, 8) == pytest.approx(1.0)
    assert budget_plan.hit_rate(COUNTS, 100) == pytest.approx(1.0)


def test_reserve_is_the_headers():
    header = (REPO / "ports" / "linux" / "colibri_linux.h").read_text()
    shift = int(re.search(r"#define COLIBRI_LINUX_PROCESS_RESERVE \(24u << (\d+)\)", header)[1])
    assert budget_plan.PROCESS_RESERVE == 24 << shift


def test_slots_are_the_c_librarys(tiny_image_path):
    from colibri_tools.runtime.engine import Engine

    with Engine(tiny_image_path, expert_slots=3) as engine:
        lib, layout = engine._lib, engine.experts.layout
        sizes = Sizes(dense_bytes=layout.dense_bytes, block_bytes=layout.block_max,
                      held_bytes=1000, moe_layers=layout.moe_layers, experts=layout.experts,
                      top_k=engine.hparams["top_k"])
        assert sizes.slot_bytes == layout.slot_bytes
        least = sizes.dense_bytes + 1000 + budget_plan.PROCESS_RESERVE + 3 * sizes.slot_bytes
        for budget in (0, least - 1, least, least + sizes.slot_bytes - 1, least + 5 * 10**6,
                       10**12):
            theirs = lib.colibri_linux_budget_slots(engine.experts.layout, budget, 1000, None)
            assert sizes.slots(budget) == theirs, budget


@pytest.fixture
def tiny_image_path(tmp_path):
    import sys

    sys.path.insert(0, str(REPO / "tests" / "ports" / "linux"))
    from linux_tiny_image import write_tiny_image

    return write_tiny_image(tmp_path / "model.bin")


def test_predict_is_bounded_by_compute_and_reads():
    sizes = Sizes(dense_bytes=10**8, block_bytes=10**6, held_bytes=0, moe_layers=2, experts=4,
                  top_k=2)
    fixed = 10**8 + budget_plan.PROCESS_RESERVE
    rows = budget_plan.predict(COUNTS, sizes, [10**8, fixed + 3 * sizes.slot_bytes,
                                               2 * 10**8], 100e6, 0.01)
    assert rows[0]["slots"] == 0 and rows[0]["tok_s_high"] == 0.0  # below the minimum
    # 3 slots, fewer than a token's 2 x 2 experts: 0 .. the steady state's (9+8+8)/40
    low = rows[1]
    assert low["slots"] == 3 and low["hit_rate_low"] == 0.0
    assert low["hit_rate"] == pytest.approx(25 / 40)
    assert low["read_mb_per_token"] == pytest.approx(4.0)
    assert low["tok_s_low"] == pytest.approx(1 / (0.01 + 0.04))
    assert low["tok_s_high"] == pytest.approx(1 / max(0.01, 0.04 * 15 / 40))
    r = rows[2]
    assert r["slots"] == 8 and r["hit_rate"] == pytest.approx(1.0)
    assert r["tok_s_low"] == pytest.approx(100.0) == r["tok_s_high"]


def test_cli_cache_and_budget_pictures(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    import sys

    sys.path.insert(0, str(REPO / "tests" / "ports" / "linux"))
    from linux_tiny_image import write_tiny_image

    image = write_tiny_image(tmp_path / "model.bin")
    done = subprocess.run(["make", "-s", "-j2", "build/host/colibri-run"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    run = [str(REPO / "build/host/colibri-run"), str(image), "--ids", "1,2,3,4", "--gen", "12",
           "--stats"]
    (tmp_path / "mem.txt").write_text(subprocess.run(run, capture_output=True, text=True).stderr)
    (tmp_path / "cache.txt").write_text(subprocess.run(
        [*run, "--expert-slots", "3"], capture_output=True, text=True).stderr)
    stats = plot.parse_stats((tmp_path / "cache.txt").read_text())
    assert len(stats.token_stall_ns) == len(stats.token_ns) == 11
    assert plot.main(["cache", str(tmp_path / "cache.txt"), "-o", str(tmp_path / "c.png")]) == 0
    assert plot.main(["budget", str(tmp_path / "mem.txt"), "--image", str(image),
                      "--disk-mbps", "500", "--percents", "1,50,100", "-o",
                      str(tmp_path / "b.png")]) == 0
    out = capsys.readouterr().out
    assert "below minimum" in out  # 1 % of a tiny image cannot hold the 24 MiB reserve
    assert (tmp_path / "c.png").read_bytes().startswith(b"\x89PNG")
    assert plot.main(["cache", str(tmp_path / "mem.txt"), "-o", str(tmp_path / "x.png")]) == 1
