"""The expert cache through Python (docs/linux.md, Models larger than memory):
Engine(memory_budget=..., expert_slots=...) and colibri-generate
--memory-budget give the logits and tokens of the in-memory engine; a budget
below the minimum, or one with no experts to stream, is a named error."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from colibri_tools.image.image_spec import ModelRecord
from colibri_tools.runtime.engine import Engine, EngineError
from colibri_tools.runtime.generate import main
from linux_tiny_image import write_tiny_image
from test_linux_generate import write_word_tokenizer

IDS = [1, 5, 9, 3, 7, 2, 8, 4, 6, 11, 13, 12, 10]


def _logits_and_tokens(engine: Engine) -> tuple[np.ndarray, list[int]]:
    rows = engine.forward(IDS, logits="all")
    engine.reset()
    return rows, engine.greedy(IDS, 6)


@pytest.mark.parametrize("io_threads", [0, 3])
@pytest.mark.parametrize("slots", [3, 5, 8])
def test_slots_give_the_in_memory_bits(tiny_image, slots, io_threads):
    with Engine(tiny_image, threads=2, batch=5) as engine:
        want_rows, want_ids = _logits_and_tokens(engine)
    with Engine(tiny_image, threads=2, batch=5, expert_slots=slots,
                io_threads=io_threads) as engine:
        rows, ids = _logits_and_tokens(engine)
        stats = engine.experts.stats()
    assert rows.tobytes() == want_rows.tobytes() and ids == want_ids
    assert stats["slots"] == slots and stats["acquires"] > 0 and stats["failures"] == 0


def test_a_budget_sizes_the_cache_or_states_the_minimum(tiny_image):
    with Engine(tiny_image, expert_slots=3) as engine:
        layout, held = engine.experts.layout, (engine.state_bytes + engine.scratch_bytes +
                                               engine._logits.nbytes)
    least = layout.dense_bytes + held + (24 << 20) + 3 * layout.slot_bytes
    with Engine(tiny_image, memory_budget=least + layout.slot_bytes) as engine:
        assert engine.experts.stats()["slots"] == 4
    with pytest.raises(EngineError, match=f"below this model's minimum of {least} bytes") as e:
        Engine(tiny_image, memory_budget=least - 1)
    assert e.value.status == "COLIBRI_LINUX_E_BUDGET"
    with pytest.raises(EngineError, match="not both"):
        Engine(tiny_image, memory_budget=least, expert_slots=3)


def test_a_model_without_experts_is_refused(tmp_path):
    dense = ModelRecord(vocab_size=64, hidden_size=32, n_layers=1, n_heads=4, n_kv_heads=2,
                        head_dim=8, max_context=32, dense_intermediate=16,
                        expert_intermediate=0, n_experts=0, shared_intermediate=0,
                        rms_eps=1e-5, rope_theta=10000.0, top_k=0, router_norm_topk=0)
    image = write_tiny_image(tmp_path / "dense.bin", record=dense, dense=True)
    with pytest.raises(EngineError) as e:
        Engine(image, expert_slots=3)
    assert e.value.status == "COLIBRI_LINUX_E_NO_EXPERTS"


def test_generate_with_a_budget_prints_the_same_text(tiny_image, tmp_path, capsys):
    d = tmp_path / "model"
    d.mkdir()
    shutil.copyfile(tiny_image, d / "model.bin")
    write_word_tokenizer(d / "model_tokenizer.json", 64)
    argv = [str(d), "--prompt", "w5 w6 w7", "--gen", "6"]
    assert main(argv) == 0
    want = capsys.readouterr().out
    assert main([*argv, "--memory-budget", "64MiB"]) == 0
    assert capsys.readouterr().out == want
    assert main([*argv, "--expert-slots", "3"]) == 0
    assert capsys.readouterr().out == want
