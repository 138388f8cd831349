"""The demo model in models/tiny_moe and the script that trained it (colibri-train-tiny).

The committed checkpoint must load with transformers, convert into an image small
enough for the Cortex-M boards' weight regions, and generate the same greedy text
with the C engine (colibri-run on Linux) as with transformers (the oracle). A short
training run on a small text must lower the loss. Nothing here retrains the demo.
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from colibri_tools.training import train_tiny
from colibri_tools.training.train_tiny import ModelShape, TrainError, TrainOptions

REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = REPO / "models" / "tiny_moe"
MAX_IMAGE_BYTES = 8 * 1024 * 1024     # an500: 16 MiB PSRAM, half kept free
MAX_CHECKPOINT_BYTES = 4 * 1024 * 1024
PROMPT = "It is a truth universally acknowledged"
GEN = 40
AUSTEN_SENTENCE = ("It is a truth universally acknowledged, that a single man in possession of "
                   "a good fortune, must be in want of a wife.")


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))


@pytest.fixture(scope="module")
def hf_model():
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32)
    return model.eval()


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    from colibri_tools.converter.convert import convert

    return convert(MODEL_DIR, tmp_path_factory.mktemp("tiny_moe"), progress=False)


@pytest.fixture(scope="module")
def colibri_run() -> Path:
    if shutil.which("make") is None or shutil.which("gcc") is None:
        pytest.skip("make and gcc are needed to build colibri-run (apt-get install build-essential)")
    done = subprocess.run(["make", "-s", "host"], cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return REPO / "build" / "host" / "colibri-run"


def _greedy_ids(model, prompt_ids: list[int], n: int) -> list[int]:
    return train_tiny.greedy(model, prompt_ids, n)


# ---- the committed checkpoint -------------------------------------------------------

def test_checkpoint_files_are_small_half_precision_mixtral() -> None:
    from safetensors import safe_open

    config = json.loads((MODEL_DIR / "config.json").read_text())
    assert config["model_type"] == "mixtral" and config["num_local_experts"] >= 4
    assert config["num_experts_per_tok"] == 2
    weights = MODEL_DIR / "model.safetensors"
    assert weights.stat().st_size <= MAX_CHECKPOINT_BYTES
    with safe_open(str(weights), "pt") as f:
        dtypes = {f.get_slice(name).get_dtype() for name in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
    assert dtypes == {"BF16"}
    for name in ("tokenizer.json", "README.md", "training.json", "generation_config.json"):
        assert (MODEL_DIR / name).is_file(), name


def test_tokenizer_decode_is_concatenation(tokenizer) -> None:
    config = json.loads((MODEL_DIR / "config.json").read_text())
    assert tokenizer.get_vocab_size() == config["vocab_size"]
    assert 256 <= config["vocab_size"] <= 512
    ids = tokenizer.encode(AUSTEN_SENTENCE + "\n" + PROMPT, add_special_tokens=False).ids
    assert tokenizer.decode(ids) == AUSTEN_SENTENCE + "\n" + PROMPT
    assert tokenizer.decode(ids) == "".join(tokenizer.id_to_token(i) for i in ids)


def test_model_predicts_austen_better_than_chance(hf_model, tokenizer) -> None:
    import math

    import torch

    ids = torch.tensor([tokenizer.encode(AUSTEN_SENTENCE, add_special_tokens=False).ids])
    with torch.no_grad():
        loss = hf_model(input_ids=ids, labels=ids).loss.item()
    assert loss < 0.5 * math.log(hf_model.config.vocab_size), loss


def test_training_record_matches_the_checkpoint(hf_model, tokenizer) -> None:
    """The greedy sample that training recorded (PyTorch, at save time) is what the
    committed weights produce now: the checkpoint is the one that run wrote."""
    record = json.loads((MODEL_DIR / "training.json").read_text())
    result = record["result"]
    prompt_ids = tokenizer.encode(result["sample_prompt"], add_special_tokens=False).ids
    assert _greedy_ids(hf_model, prompt_ids, len(result["sample_ids"])) == result["sample_ids"]
    assert result["val_loss_saved"] < result["first_loss"] - 2.0


def test_converts_into_an_image_for_the_boards(converted) -> None:
    assert converted.family == "mixtral"
    assert converted.image_size <= MAX_IMAGE_BYTES
    assert converted.image_path.stat().st_size == converted.image_size
    assert converted.tokenizer_path is not None and converted.tokenizer_path.is_file()


def test_c_engine_greedy_text_equals_transformers(converted, colibri_run, hf_model,
                                                   tokenizer) -> None:
    prompt_ids = tokenizer.encode(PROMPT, add_special_tokens=False).ids
    want = _greedy_ids(hf_model, prompt_ids, GEN)
    done = subprocess.run([str(colibri_run), str(converted.image_path), "--ids",
                           ",".join(map(str, prompt_ids)), "--gen", str(GEN)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    got = [int(t) for t in done.stdout.split()]
    assert got == want
    text = tokenizer.decode(got)
    assert text == tokenizer.decode(want)
    assert sum(c.isalpha() or c in " ,.;'\n" for c in text) >= 0.9 * len(text), text


# ---- training -------------------------------------------------------------------------

def _small_text(n_sentences: int = 900, seed: int = 1) -> str:
    rng = random.Random(seed)
    people = ["Emma", "Mr. Knightley", "Harriet", "her father", "Mrs. Weston"]
    verbs = ["walked to", "spoke of", "thought of", "wrote to", "smiled at"]
    things = ["the garden", "Highbury", "the letter", "the party", "the weather"]
    lines = [f"{rng.choice(people)} {rng.choice(verbs)} {rng.choice(things)}."
             for _ in range(n_sentences)]
    return "\n".join(" ".join(lines[i:i + 3]) for i in range(0, len(lines), 3)) + "\n"


TINY_SHAPE = ModelShape(vocab_size=64, hidden_size=32, n_layers=1, n_heads=2, n_kv_heads=1,
                        head_dim=16, n_experts=4, top_k=2, expert_width=32, context=32)
TINY_OPTIONS = TrainOptions(steps=40, batch=8, seq_len=32, lr=1e-2, warmup=4, eval_every=20,
                            eval_windows=8, val_fraction=0.1, sample_prompt="Emma",
                            sample_tokens=4, threads=1)


def test_short_training_run_lowers_the_loss(tmp_path: Path) -> None:
    result = train_tiny.train(_small_text(), tmp_path / "out", TINY_SHAPE, TINY_OPTIONS)
    assert result.final_train_loss < result.first_loss - 1.0, (result.first_loss,
                                                                result.final_train_loss)
    assert result.val_loss < result.first_loss - 1.0
    for name in ("config.json", "model.safetensors", "tokenizer.json", "training.json"):
        assert (tmp_path / "out" / name).is_file(), name
    record = json.loads((tmp_path / "out" / "training.json").read_text())
    assert record["options"]["steps"] == 40 and len(record["history"]) == 2
    assert len(result.sample_ids) == 4


def test_same_seed_same_model(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    options = TrainOptions(**{**TINY_OPTIONS.__dict__, "steps": 3, "eval_every": 3})
    a = train_tiny.train(_small_text(90), tmp_path / "a", TINY_SHAPE, options)
    b = train_tiny.train(_small_text(90), tmp_path / "b", TINY_SHAPE, options)
    assert a.history == b.history
    wa, wb = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert all(wa[k].equal(wb[k]) for k in wa)


def test_learning_rate_warms_up_then_decays() -> None:
    options = TrainOptions(steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1)
    rates = [train_tiny.learning_rate(s, options) for s in range(100)]
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert all(x >= y for x, y in itertools.pairwise(rates[9:]))
    assert rates[-1] == pytest.approx(0.1, abs=1e-3)


@pytest.mark.parametrize("shape, options, message", [
    (ModelShape(top_k=5, n_experts=4), TrainOptions(), "top_k"),
    (ModelShape(n_heads=4, n_kv_heads=3), TrainOptions(), "n_kv_heads"),
    (ModelShape(context=64), TrainOptions(seq_len=128), "seq_len"),
    (ModelShape(family="llama"), TrainOptions(), "family"),
    (ModelShape(), TrainOptions(dtype="int8"), "dtype"),
])
def test_bad_options_are_refused(tmp_path: Path, shape, options, message) -> None:
    with pytest.raises(TrainError, match=message):
        train_tiny.train("some text\n" * 50, tmp_path, shape, options)


def test_text_too_short_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TrainError, match="tokens"):
        train_tiny.train("a few words\nand more\n", tmp_path, TINY_SHAPE,
                         TrainOptions(**{**TINY_OPTIONS.__dict__, "val_fraction": 0.5}))


def test_cli_reports_a_missing_text(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nothing.txt"
    assert train_tiny.main(["--text", str(missing), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("colibri-train-tiny: error:") and str(missing) in err
