"""colibri-quant-report: its arithmetic on hand-made routes and logits, an
image against itself (nothing differs), and the demo model's figures
against transformers (the float32 side's perplexity and the quantized
image's agreement computed here from transformers' logits and colibri-run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from colibri_tools.bench.quant_report import Comparison, compare_logits, compare_routes, finish, main
from colibri_tools.converter.convert import convert

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "models" / "tiny_moe"
TEXT = ("It was a fine morning in the country, and Mrs. Bennet had been at the window since "
        "breakfast, watching the lane for any carriage that might bring news. Her daughters were "
        "in the drawing room; Elizabeth was reading, and Jane was at her work, while Lydia talked "
        "of the officers and of the ball that was to be given at the end of the month. \"My dear,\" "
        "said their mother, \"you must not sit so quietly when a gentleman of good fortune is come "
        "into the county.\" Elizabeth smiled, and said that she had no wish to be seen by anybody "
        "who did not wish to see her.")


def test_route_arithmetic_by_hand():
    acc = Comparison()
    experts = np.array([[[0, 1], [-1, -1], [2, 3]],      # token 0: layer 1 dense
                        [[1, 2], [-1, -1], [0, 3]]], np.int32)
    quant = np.array([[[0, 1], [-1, -1], [2, 4]],        # token 0 layer 2: 3 -> 4
                      [[1, 2], [-1, -1], [0, 3]]], np.int32)
    w = np.array([[[0.6, 0.4], [0, 0], [0.5, 0.5]], [[0.7, 0.3], [0, 0], [0.9, 0.1]]], np.float32)
    wq = w.copy()
    wq[0, 0] = [0.5, 0.5]
    compare_routes(acc, (experts, quant), (w, wq))
    report = finish(acc, 1, "ids")
    assert report.router_pairs == 4 and report.router_set_differs == 0.25
    # deltas: 0.1, 0.1 | 0, 0 (=2, 3 ... expert 2 same), 0.5 (3 gone), 0.5 (4 new) | 0, 0 | 0, 0
    assert report.router_weight_delta == pytest.approx((0.1 + 0.1 + 0.5 + 0.5) / 9, abs=1e-7)


def test_logit_arithmetic_by_hand():
    acc = Comparison()
    ref = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]]))
    quant = np.log(np.array([[0.25, 0.5, 0.25], [0.1, 0.1, 0.8]]))
    compare_logits(acc, [0, 2], ref, quant, perplexity=True)
    report = finish(acc, 1, "text")
    assert report.top1_agreement == 0.5
    assert report.kl_mean == pytest.approx((0.5 * np.log(2) + 0.25 * np.log(0.5)) / 2)
    assert report.perplexity_fp32 == pytest.approx(1 / 0.25)  # row 0 predicts id 2
    assert report.perplexity_quant == pytest.approx(1 / 0.25)


@pytest.fixture(scope="module")
def demo_images(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("quant_report")
    return {q or "fp32": convert(DEMO, root / (q or "fp32"), context=256, progress=False,
                                 quant=q).image_path for q in (None, "int8", "int4")}


def _report(capsys, *args: str) -> dict:
    assert main([*map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_an_image_against_itself_differs_nowhere(demo_images, capsys):
    got = _report(capsys, demo_images["fp32"], demo_images["fp32"], "--ids", "1,2,3,4,5,6,7",
                  "--ids", "9,8,7")
    assert (got["prompts"], got["positions"], got["router_pairs"]) == (2, 10, 40)
    assert got["top1_agreement"] == 1.0 and got["kl_max"] == 0.0
    assert got["router_set_differs"] == 0.0 and got["router_weight_delta"] == 0.0


def test_demo_figures_match_transformers(demo_images, capsys, tmp_path):
    """fp32 perplexity = transformers' on the same windows; the quantized
    image's top-1 agreement and KL against transformers' logits (colibri-run's
    --all-logits) are what the report says against the fp32 image."""
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    sys.path.insert(0, str(REPO / "tests" / "golden"))
    from golden_helpers import run_engine

    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    ids = Tokenizer.from_file(str(DEMO / "tokenizer.json")).encode(TEXT).ids
    windows = [ids[i:i + 64] for i in range(0, len(ids), 64) if len(ids[i:i + 64]) > 1]
    model = AutoModelForCausalLM.from_pretrained(DEMO, torch_dtype=torch.float32).eval()
    vocab = model.config.vocab_size
    colibri_run = REPO / "build" / "host" / "colibri-run"
    for quant in ("int8", "int4"):
        got = _report(capsys, demo_images["fp32"], demo_images[quant], "--text", text,
                      "--window", "64", "--threads", "1")
        assert got["positions"] == sum(map(len, windows)) and got["source"] == "text"
        nll, same, kl = [], [], []
        for w in windows:
            with torch.no_grad():
                hf = torch.log_softmax(model(torch.tensor([w])).logits[0].double(), -1).numpy()
            nll += (-hf[np.arange(len(w) - 1), w[1:]]).tolist()
            _, q = run_engine(colibri_run, demo_images[quant], w, vocab=vocab,
                              logits_path=tmp_path / "q.bin")
            lq = torch.log_softmax(torch.tensor(q, dtype=torch.float64), -1).numpy()
            same += (hf.argmax(-1) == lq.argmax(-1)).tolist()
            kl += (np.exp(hf) * (hf - lq)).sum(-1).tolist()
        assert got["perplexity_fp32"] == pytest.approx(float(np.exp(np.mean(nll))), rel=1e-4)
        assert abs(got["top1_agreement"] - np.mean(same)) <= 2 / len(same)
        assert got["kl_mean"] == pytest.approx(float(np.mean(kl)), rel=0.02, abs=1e-6)
        assert 0.0 <= got["router_set_differs"] < 0.1 and got["router_weight_delta"] > 0
    assert got["top1_agreement"] >= 0.85  # int4, the trained demo model
