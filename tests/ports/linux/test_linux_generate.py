"""colibri-generate (tools/colibri_tools/generate.py): prompt text in, text
out, through colibri-run; clear errors for everything that can be missing."""

from __future__ import annotations

import os
import shutil
import stat

import pytest
from colibri_tools import generate as gen_mod
from colibri_tools.errors import ColibriError
from colibri_tools.generate import GenerateError, find_runner, generate, main, parse_ids_line
from linux_helpers import run
from linux_tiny_image import VOCAB

tokenizers = pytest.importorskip("tokenizers")


def write_word_tokenizer(path, vocab_size: int) -> None:
    """A word-level tokenizer: "w0" .. "w{n-1}" are ids 0 .. n-1."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit

    tok = Tokenizer(WordLevel({f"w{i}": i for i in range(vocab_size)}, unk_token="w0"))
    tok.pre_tokenizer = WhitespaceSplit()
    tok.save(str(path))


@pytest.fixture
def model_dir(tmp_path, tiny_image):
    d = tmp_path / "model"
    d.mkdir()
    shutil.copyfile(tiny_image, d / "model.bin")
    write_word_tokenizer(d / "model_tokenizer.json", VOCAB)
    return d


def _script(path, body: str):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# ---- the happy path -----------------------------------------------------------------

def test_generate_matches_colibri_run(model_dir, colibri_run):
    result = generate(model_dir, "w5 w6 w7", 6, runner=colibri_run)
    assert result.prompt_ids == [5, 6, 7]
    direct = run(colibri_run, model_dir / "model.bin", "--ids", "5,6,7", "--gen", "6")
    assert result.ids == [int(t) for t in direct.stdout.split()]
    assert result.text == " ".join(f"w{i}" for i in result.ids)


def test_main_prints_the_text(model_dir, colibri_run, capsys):
    assert main([str(model_dir), "--prompt", "w1 w2", "--gen", "4", "--run", str(colibri_run),
                 "--show-ids"]) == 0
    out, err = capsys.readouterr()
    ids = [int(w[1:]) for w in out.split()]
    assert len(ids) == 4 and out.endswith("\n")
    assert "prompt ids: 1 2" in err
    assert f"generated ids: {' '.join(map(str, ids))}" in err


def test_main_gen_zero(model_dir, colibri_run, capsys):
    assert main([str(model_dir), "--prompt", "w1", "--gen", "0", "--run", str(colibri_run)]) == 0
    assert capsys.readouterr().out == "\n"


def test_main_stats_on_stderr(model_dir, colibri_run, capsys):
    assert main([str(model_dir), "--prompt", "w1", "--gen", "2", "--run", str(colibri_run),
                 "--stats"]) == 0
    out, err = capsys.readouterr()
    assert "colibri-run: prompt: tokens=1" in err
    assert "colibri-run" not in out


def test_runner_from_environment(model_dir, colibri_run, monkeypatch):
    monkeypatch.setenv("COLIBRI_RUN", str(colibri_run))
    assert find_runner() == colibri_run
    assert len(generate(model_dir, "w3", 2).ids) == 2


def test_runner_from_repository_build(colibri_run, monkeypatch):
    monkeypatch.delenv("COLIBRI_RUN", raising=False)
    assert find_runner() == gen_mod.repo_runner() == colibri_run


def test_runner_on_path(tmp_path, monkeypatch):
    monkeypatch.setattr(gen_mod, "repo_runner", lambda: tmp_path / "nowhere" / "colibri-run")
    fake = _script(tmp_path / "colibri-run", "exit 0\n")
    assert find_runner(environ={"PATH": str(tmp_path)}) == fake


def test_long_generation_asks_for_a_larger_context(tmp_path, monkeypatch):
    args_file = tmp_path / "args"
    fake = _script(tmp_path / "fake-run", f'echo "$@" > {args_file}\necho 7 7 7\n')
    ids, _ = gen_mod.run_ids(fake, tmp_path / "m.bin", [1] * 2047, 3)
    assert "--context 2049" in args_file.read_text()
    assert ids == [7, 7, 7]


# ---- errors ---------------------------------------------------------------------------

def test_missing_model_dir(tmp_path, colibri_run, capsys):
    assert main([str(tmp_path / "nope"), "--prompt", "w1", "--run", str(colibri_run)]) == 1
    err = capsys.readouterr().err
    assert "colibri-generate: error:" in err and "model directory not found" in err


def test_model_dir_is_a_file(tmp_path, tiny_image):
    with pytest.raises(GenerateError, match="not a directory"):
        generate(tiny_image, "w1", 1)


def test_missing_tokenizer(model_dir, colibri_run):
    (model_dir / "model_tokenizer.json").unlink()
    with pytest.raises(GenerateError, match="no tokenizer model_tokenizer.json"):
        generate(model_dir, "w1", 1, runner=colibri_run)


def test_missing_image(model_dir, colibri_run):
    (model_dir / "model.bin").unlink()
    with pytest.raises(GenerateError, match="no model image model.bin"):
        generate(model_dir, "w1", 1, runner=colibri_run)


def test_corrupt_tokenizer(model_dir, colibri_run):
    (model_dir / "model_tokenizer.json").write_text("{not json")
    with pytest.raises(GenerateError, match="cannot read the tokenizer"):
        generate(model_dir, "w1", 1, runner=colibri_run)


def test_missing_binary(model_dir, tmp_path, capsys):
    assert main([str(model_dir), "--prompt", "w1", "--run", str(tmp_path / "no-run")]) == 1
    assert "--run: no such file" in capsys.readouterr().err


def test_binary_not_executable(model_dir, tmp_path, monkeypatch):
    plain = tmp_path / "colibri-run"
    plain.write_text("")
    plain.chmod(0o644)
    monkeypatch.setenv("COLIBRI_RUN", str(plain))
    if os.access(plain, os.X_OK):
        pytest.skip("the file system ignores execute bits")  # pragma: no cover
    with pytest.raises(GenerateError, match=r"\$COLIBRI_RUN: the file is not executable"):
        generate(model_dir, "w1", 1)


def test_no_binary_anywhere(tmp_path, monkeypatch):
    monkeypatch.setattr(gen_mod, "repo_runner", lambda: tmp_path / "nowhere" / "colibri-run")
    with pytest.raises(GenerateError, match="cannot find the colibri-run binary.*make host"):
        find_runner(environ={"PATH": str(tmp_path)})


def test_colibri_run_failure_is_relayed(model_dir, colibri_run):
    # The tokenizer knows more words than the model has ids: colibri-run refuses.
    write_word_tokenizer(model_dir / "model_tokenizer.json", VOCAB + 10)
    with pytest.raises(GenerateError) as info:
        generate(model_dir, f"w1 w{VOCAB + 3}", 2, runner=colibri_run)
    text = str(info.value)
    assert "colibri-run failed (usage error)" in text
    assert f"is not below the model's vocab_size {VOCAB}" in text
    assert isinstance(info.value, ColibriError)


def test_bad_image_is_relayed(model_dir, colibri_run):
    (model_dir / "model.bin").write_bytes(b"not an image" * 40)
    with pytest.raises(GenerateError,
                       match=r"(?s)model or runtime error.*not a Colibri model image"):
        generate(model_dir, "w1", 2, runner=colibri_run)


def test_empty_prompt(model_dir, colibri_run):
    with pytest.raises(GenerateError, match="encodes to no tokens"):
        generate(model_dir, "", 2, runner=colibri_run)


def test_timeout(model_dir, tmp_path):
    slow = _script(tmp_path / "slow-run", "sleep 30\n")
    with pytest.raises(GenerateError, match="did not finish within 0.5 s"):
        generate(model_dir, "w1", 2, runner=slow, timeout=0.5)


def test_killed_runner(model_dir, tmp_path):
    dying = _script(tmp_path / "dying-run", "kill -SEGV $$\n")
    with pytest.raises(GenerateError, match="killed by signal 11"):
        generate(model_dir, "w1", 2, runner=dying)


@pytest.mark.parametrize("stdout,expected,message", [
    ("", 0, "printed 0 lines"),
    ("1 2\n3\n", 3, "printed 2 lines"),
    ("1 x 3\n", 3, "something other than token ids"),
    ("1 2\n", 3, "printed 2 ids, expected 3"),
])
def test_parse_ids_line_rejects(stdout, expected, message):
    with pytest.raises(GenerateError, match=message):
        parse_ids_line(stdout, expected)


def test_parse_ids_line():
    assert parse_ids_line("\n", 0) == []
    assert parse_ids_line("4 5 6\n", 3) == [4, 5, 6]


@pytest.mark.parametrize("argv", [
    ["model"],                                    # no --prompt
    ["--prompt", "x"],                            # no MODEL_DIR
    ["model", "--prompt", "x", "--gen", "-1"],
    ["model", "--prompt", "x", "--gen", "two"],
    ["model", "--prompt", "x", "--timeout", "0"],
])
def test_usage_errors(argv, capsys):
    assert main(argv) == 2
    assert "usage: colibri-generate" in capsys.readouterr().err


def test_help(capsys):
    assert main(["--help"]) == 0
    assert "MODEL_DIR" in capsys.readouterr().out


# ---- with the converter: a Hugging Face model end to end ------------------------------

def test_converted_model_end_to_end(tmp_path, colibri_run):
    """Checkpoint -> colibri-convert -> colibri-generate gives the ids of
    transformers' greedy generate."""
    torch = pytest.importorskip("torch")
    try:
        from colibri_tools.convert import convert
        from hf_models import build_model, save_checkpoint
    except ImportError as exc:
        pytest.skip(f"converter or tests/hf_models.py not available yet: {exc}")
    model, config = build_model("mixtral", seed=7)
    save_checkpoint(model, tmp_path / "hf")
    write_word_tokenizer(tmp_path / "hf" / "tokenizer.json", config.vocab_size)
    convert(tmp_path / "hf", tmp_path / "out", context=64, progress=False)
    assert (tmp_path / "out" / "model_tokenizer.json").is_file(), \
        "colibri-convert did not copy tokenizer.json to model_tokenizer.json"
    prompt = [3, 1, 4, 1, 5]
    result = generate(tmp_path / "out", " ".join(f"w{i}" for i in prompt), 5,
                      runner=colibri_run, extra_args=["--verify"])
    assert result.prompt_ids == prompt
    with torch.no_grad():
        want = model.generate(torch.tensor([prompt]), max_new_tokens=5, do_sample=False,
                              pad_token_id=0)[0, len(prompt):].tolist()
    assert result.ids == want
