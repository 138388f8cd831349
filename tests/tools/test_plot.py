"""colibri-plot (tools/colibri_tools/bench/plot.py): the pictures hold the numbers of
the run they draw (read back from the figures), the SRAM plan picks the most
used expert blocks, and bad input is a clear error."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from colibri_tools.bench import plot

pytest.importorskip("matplotlib")

STATS = """colibri-run: model: arch=mixtral vocab=64
colibri-run: token_ns: 1000000,2000000,1500000,1200000,9000000
colibri-run: decode: steps=5 ns=14700000
colibri-run: experts: layer=1 top_k=2 routed=20 counts=1,9,8,2
colibri-run: experts: layer=2 top_k=2 routed=20 counts=5,8,3,4
"""
REPORT = {"bytes_per_decoded_token": 200_000_000, "read_gb_per_s": {"1": 16.0, "2": 29.0},
          "rows": [{"engine": "colibri", "threads": 1, "decode_tok_s": 79.0},
                   {"engine": "llama.cpp", "threads": 1, "decode_tok_s": 70.0},
                   {"engine": "colibri", "threads": 2, "decode_tok_s": 150.0}]}
PNG = b"\x89PNG\r\n\x1a\n"


def test_parse_stats_reads_colibri_run_lines():
    stats = plot.parse_stats(STATS)
    assert stats.layers == [1, 2]  # layer 0 is dense: no line
    assert stats.counts.tolist() == [[0, 0, 0, 0], [1, 9, 8, 2], [5, 8, 3, 4]]
    assert stats.token_ns == [1000000, 2000000, 1500000, 1200000, 9000000]
    other = plot.parse_stats(STATS.replace("colibri-run", "colibri-generate"))
    assert other.counts.tolist() == stats.counts.tolist()


def test_zero_computation_experts_get_a_column_of_their_own():
    """Format 1.12 (LongCat-Flash): `zero=` on an experts line is the layer's choices
    of zero-computation experts, drawn apart from the real experts' (which alone can
    be placed in SRAM) and counted in the layer's shares."""
    text = STATS.replace("counts=1,9,8,2", "counts=1,9,8,2 zero=20").replace(
        "counts=5,8,3,4", "counts=5,8,3,4 zero=0")
    stats = plot.parse_stats(text)
    assert stats.zero.tolist() == [0, 20, 0]
    ax = plot.experts_figure(stats).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3", "zero"]
    assert np.allclose(np.asarray(ax.images[0].get_array()),
                       [[2.5, 22.5, 20, 5, 50], [25, 40, 15, 20, 0]])
    assert plot.parse_stats(STATS).zero is None


def test_sram_plan_takes_the_most_used_blocks():
    counts = np.array([[0, 0, 0, 0], [1, 9, 8, 2], [5, 8, 3, 4]])
    assert np.argwhere(plot.plan_sram(counts, 3)).tolist() == [[1, 1], [1, 2], [2, 1]]
    assert plot.plan_sram(counts, 100).sum() == 8  # unused blocks never
    assert plot.plan_sram(counts, 0).sum() == 0


def test_heat_map_shows_each_layers_shares():
    stats = plot.parse_stats(STATS)
    sram = plot.plan_sram(stats.counts, 3)
    fig = plot.experts_figure(stats, sram)
    ax = fig.axes[0]
    shown = np.asarray(ax.images[0].get_array())
    assert np.allclose(shown, [[5, 45, 40, 10], [25, 40, 15, 20]])
    outlined = sorted((round(p.get_x() + 0.5), round(p.get_y() + 0.5)) for p in ax.patches)
    assert outlined == [(1, 0), (1, 1), (2, 0)]  # (expert, row): layer 1 e1, e2; layer 2 e1
    assert "the 3 of 8 blocks for SRAM, 62.5% of expert reads" in ax.get_title()


def test_latency_histogram_counts_every_step():
    fig = plot.latency_figure(plot.parse_stats(STATS).token_ns)
    ax = fig.axes[0]
    assert sum(p.get_height() for p in ax.patches) == 5
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[0] == "p50 1.500 ms"


def test_roofline_bars_and_bounds():
    rows = plot.roofline(REPORT)
    assert [r["bound"] for r in rows] == [80.0, 80.0, 145.0]
    ax = plot.roofline_figure(REPORT).axes[0]
    assert [b.get_height() for b in ax.patches] == [79.0, 70.0, 150.0]
    assert [seg[0][1] for seg in ax.collections[0].get_segments()] == [80.0, 80.0, 145.0]
    assert [t.get_text() for t in ax.texts] == ["99%", "88%", "103%"]


def test_cli_writes_pngs(tmp_path, capsys):
    (tmp_path / "run.txt").write_text(STATS)
    (tmp_path / "bench.json").write_text(json.dumps(REPORT))
    assert plot.main(["experts", str(tmp_path / "run.txt"), "-o", str(tmp_path / "e.png"),
                      "--sram-experts", "3"]) == 0
    out = capsys.readouterr().out
    assert "layer 1: SRAM [1, 2]  QSPI [0, 3]" in out and "62.5% of expert reads" in out
    assert "layer 2: SRAM [1]  QSPI [0, 2, 3]" in out
    assert out.rstrip().endswith(" pin=5:6:9")  # keys layer * 4 + expert, ascending
    assert plot.main(["latency", str(tmp_path / "run.txt"), "-o", str(tmp_path / "l.png")]) == 0
    assert plot.main(["roofline", str(tmp_path / "bench.json"), "-o", str(tmp_path / "r.png")]) == 0
    for name in ("e.png", "l.png", "r.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG)


def test_sram_bytes_use_the_images_block_size(tmp_path, capsys):
    sys.path.insert(0, str(plot.Path(__file__).resolve().parents[1] / "ports" / "linux"))
    from linux_tiny_image import write_tiny_image

    image = write_tiny_image(tmp_path / "m.bin")
    block = plot.expert_block_bytes(image)
    assert block == 3 * 16 * 32 * 4  # gate, up, down of 16 x 32 floats
    (tmp_path / "run.txt").write_text(STATS)
    assert plot.main(["experts", str(tmp_path / "run.txt"), "-o", str(tmp_path / "e.png"),
                      "--image", str(image), "--sram-bytes", str(2 * block + 5)]) == 0
    assert "SRAM: 2 expert blocks" in capsys.readouterr().out


@pytest.mark.parametrize("argv, text, status", [
    (["experts", "{stats}", "-o", "{png}", "--sram-bytes", "10"], "needs --image", 2),
    (["experts", "{empty}", "-o", "{png}"], "no experts: lines", 1),
    (["latency", "{empty}", "-o", "{png}"], "no token_ns: line", 1),
    (["roofline", "{stats}", "-o", "{png}"], "not a colibri-bench --json report", 1),
    (["latency", "{missing}", "-o", "{png}"], "cannot read", 1),
    (["latency", "{stats}", "-o", "{nodir}"], "No such file", 1),
])
def test_bad_input_is_a_clear_error(tmp_path, capsys, argv, text, status):
    (tmp_path / "run.txt").write_text(STATS)
    (tmp_path / "empty.txt").write_text("nothing here\n")
    names = {"stats": tmp_path / "run.txt", "empty": tmp_path / "empty.txt",
             "missing": tmp_path / "missing.txt", "png": tmp_path / "o.png",
             "nodir": tmp_path / "no" / "o.png"}
    assert plot.main([a.format(**names) for a in argv]) == status
    assert text in capsys.readouterr().err


def test_broken_stats_line_names_the_line():
    with pytest.raises(plot.PlotError, match="line 2"):
        plot.parse_stats("x\ncolibri-run: experts: layer=zero counts=1,2\n")


def test_without_matplotlib(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(plot.PlotError, match=r"pip install 'colibri-tools\[plot\]'"):
        plot.latency_figure([1, 2, 3])
