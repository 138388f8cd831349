"""colibri-generate (tools/colibri_tools/runtime/generate.py): text in, text out with
the engine in the process; greedy ids equal colibri-run's, EOS stops, the text
streams, sampling is reproducible, chat and interactive modes work, and every
missing part gives a clear error."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time

import pytest
from colibri_tools.errors import ColibriError
from colibri_tools.runtime.generate import (
    GenerateError,
    Session,
    TextStream,
    generate,
    main,
    sampling_defaults,
)
from colibri_tools.runtime.sampling import SamplingOptions
from linux_helpers import REPO, run
from linux_tiny_image import VOCAB

tokenizers = pytest.importorskip("tokenizers")

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def write_word_tokenizer(path, vocab_size: int) -> None:
    """A word-level tokenizer: "w0" .. "w{n-1}" are ids 0 .. n-1."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit

    tok = Tokenizer(WordLevel({f"w{i}": i for i in range(vocab_size)}, unk_token="w0"))
    tok.pre_tokenizer = WhitespaceSplit()
    tok.save(str(path))


@pytest.fixture
def model_dir(tmp_path, tiny_image, colibri_run):
    d = tmp_path / "model"
    d.mkdir()
    shutil.copyfile(tiny_image, d / "model.bin")
    write_word_tokenizer(d / "model_tokenizer.json", VOCAB)
    return d


def _greedy(colibri_run, image, ids, gen) -> list[int]:
    done = run(colibri_run, image, "--ids", ",".join(map(str, ids)), "--gen", gen)
    assert done.returncode == 0, done.stderr
    return [int(t) for t in done.stdout.split()]


# ---- the happy path -----------------------------------------------------------------

def test_generate_matches_colibri_run(model_dir, colibri_run):
    result = generate(model_dir, "w5 w6 w7", 6, stop_at_eos=False)
    assert result.prompt_ids == [5, 6, 7]
    assert result.ids == _greedy(colibri_run, model_dir / "model.bin", [5, 6, 7], 6)
    assert result.text == "".join(f" w{i}" for i in result.ids)  # after the prompt: a space
    assert result.stop == "length" and len(result.token_ns) == 5


def test_main_prints_the_text(model_dir, capsys):
    assert main([str(model_dir), "--prompt", "w1 w2", "--gen", "4", "--show-ids"]) == 0
    out, err = capsys.readouterr()
    ids = [int(w[1:]) for w in out.split()]
    assert len(ids) == 4 and out.endswith("\n")
    assert "prompt ids: 1 2" in err
    assert f"generated ids: {' '.join(map(str, ids))}" in err


def test_main_gen_zero(model_dir, capsys):
    assert main([str(model_dir), "--prompt", "w1", "--gen", "0"]) == 0
    assert capsys.readouterr().out == "\n"


def test_stats_in_colibri_run_format(model_dir, colibri_run, capsys):
    assert main([str(model_dir), "--prompt", "w1 w2 w3", "--gen", "5", "--stats"]) == 0
    out, err = capsys.readouterr()
    assert "colibri-generate" not in out
    lines = {line.split(": ")[1]: line for line in err.splitlines()}
    assert "tokens=3" in lines["prompt"] and "steps=4" in lines["decode"]
    assert len(lines["token_ns"].split(": ")[2].split(",")) == 4
    direct = run(colibri_run, model_dir / "model.bin", "--ids", "1,2,3", "--gen", "5", "--stats")
    theirs = [row.split(": ", 1)[1] for row in direct.stderr.splitlines() if ": experts: " in row]
    ours = [row.split(": ", 1)[1] for row in err.splitlines() if ": experts: " in row]
    assert ours == theirs and len(ours) == 2


def test_the_text_streams_as_tokens_come(model_dir):
    positions = []
    with Session(model_dir, sampling=SamplingOptions(), threads=1) as session:
        result = session.generate([4, 5], 6, stop_at_eos=False,
                                  on_text=lambda piece: positions.append(
                                      (piece, session.engine.pos)))
    assert "".join(p for p, _ in positions) == result.text
    assert [pos for _, pos in positions] == [2, 3, 4, 5, 6, 7]  # one piece per token, in time


def test_cli_output_arrives_before_the_end(model_dir):
    """Through a pipe, the first words are readable while the generation runs:
    the generator is slowed by a sitecustomize that delays each forward call."""
    slow = model_dir.parent / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(
        "import time\nfrom colibri_tools.runtime import engine\n_f = engine.Engine.forward\n"
        "def forward(self, *a, **k):\n    time.sleep(0.3)\n    return _f(self, *a, **k)\n"
        "engine.Engine.forward = forward\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(slow), str(REPO / "tools")]))
    proc = subprocess.Popen([sys.executable, "-m", "colibri_tools.runtime.generate", str(model_dir),
                             "--prompt", "w1", "--gen", "8", "--ignore-eos"],
                            stdout=subprocess.PIPE, env=env)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        first = os.read(proc.stdout.fileno(), 100) if ready else b""
        assert first.startswith(b" w") and proc.poll() is None  # text, and still running
    finally:
        proc.wait(timeout=60)


# ---- EOS, sampling ------------------------------------------------------------------

def test_stops_at_eos_from_the_generation_config(model_dir, colibri_run):
    greedy = _greedy(colibri_run, model_dir / "model.bin", [9, 10], 8)
    eos = greedy[3]
    (model_dir / "model_generation_config.json").write_text(json.dumps({"eos_token_id": [eos]}))
    result = generate(model_dir, "w9 w10", 8)
    assert result.stop == "eos" and result.ids == greedy[:greedy.index(eos)]
    assert generate(model_dir, "w9 w10", 8, stop_at_eos=False).ids == greedy


def test_eos_from_the_tokenizer_config(model_dir, colibri_run):
    greedy = _greedy(colibri_run, model_dir / "model.bin", [9, 10], 8)
    (model_dir / "model_tokenizer_config.json").write_text(
        json.dumps({"eos_token": {"content": f"w{greedy[2]}", "special": True}}))
    assert generate(model_dir, "w9 w10", 8).ids == greedy[:greedy.index(greedy[2])]


def test_sampling_is_reproducible(model_dir):
    opts = SamplingOptions(temperature=1.5, top_k=20, top_p=0.95, repetition_penalty=1.1, seed=42)
    a = generate(model_dir, "w1 w2", 12, sampling=opts, stop_at_eos=False)
    b = generate(model_dir, "w1 w2", 12, sampling=opts, stop_at_eos=False)
    others = {tuple(generate(model_dir, "w1 w2", 12, stop_at_eos=False, sampling=SamplingOptions(
        temperature=1.5, top_k=20, top_p=0.95, repetition_penalty=1.1, seed=s)).ids)
        for s in range(5)}
    assert a.ids == b.ids and a.seed == 42
    assert len(others) > 1  # the seed matters


def test_cli_sampling_with_a_seed(model_dir, capsys):
    argv = [str(model_dir), "--prompt", "w3", "--gen", "10", "--temperature", "2", "--top-k",
            "30", "--seed", "7", "--ignore-eos", "--stats"]
    assert main(argv) == 0
    first = capsys.readouterr()
    assert main(argv) == 0
    assert capsys.readouterr().out == first.out
    assert "sampling: seed=7 temperature=2.0 top_k=30" in first.err


def test_sampling_defaults_follow_generation_config():
    assert sampling_defaults({}).greedy
    assert sampling_defaults({"do_sample": False, "temperature": 0.7}).greedy
    opts = sampling_defaults({"do_sample": True, "temperature": 0.7, "top_p": 0.9,
                              "repetition_penalty": 1.2})
    assert (opts.temperature, opts.top_k, opts.top_p, opts.repetition_penalty) == (0.7, 50, 0.9,
                                                                                   1.2)


def test_text_stream_holds_back_half_characters():
    from tokenizers import Tokenizer, decoders, models

    vocab = {"<0xC3>": 0, "<0xA9>": 1, "a": 2}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], byte_fallback=True))
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    stream = TextStream(tok, [2])
    assert stream.piece([0]) == ""           # half of "é": nothing yet
    assert stream.piece([0, 1]) == "\u00e9"  # the whole character
    assert stream.piece([0, 1, 2], final=True) == "a"


# ---- chat and interactive -----------------------------------------------------------

def _chat_model(model_dir):
    from tokenizers import AddedToken

    path = model_dir / "model_tokenizer.json"
    tok = tokenizers.Tokenizer.from_file(str(path))
    # the template's markers are single tokens, as in a real chat model
    tok.add_special_tokens([AddedToken("<|im_start|>", special=True),
                            AddedToken("<|im_end|>", special=True)])
    assert tok.get_vocab_size() <= VOCAB + 2
    tok.save(str(path))
    (model_dir / "model_tokenizer_config.json").write_text(json.dumps({"chat_template": CHATML}))
    return tok


def test_chat_prompt_is_the_rendered_template(model_dir, tmp_path):
    # vocab 64 words plus 2 markers would exceed the model: use a smaller word set
    write_word_tokenizer(model_dir / "model_tokenizer.json", VOCAB - 2)
    tok = _chat_model(model_dir)
    result = generate(model_dir, "w3 w4", 3, chat=True, system="w5", stop_at_eos=False)
    text = ("<|im_start|>system\nw5<|im_end|>\n<|im_start|>user\nw3 w4<|im_end|>\n"
            "<|im_start|>assistant\n")
    assert result.prompt_ids == tok.encode(text, add_special_tokens=False).ids


def test_chat_without_a_template(model_dir, capsys):
    assert main([str(model_dir), "--prompt", "w1", "--chat"]) == 1
    assert "no chat template" in capsys.readouterr().err


def test_interactive_text_mode_through_stdin(model_dir, colibri_run):
    out, err = io.StringIO(), io.StringIO()
    assert main([str(model_dir), "-i", "--gen", "3", "--ignore-eos"],
                stdin=io.StringIO("w1 w2\nw3\n/quit\n"), stdout=out, stderr=err) == 0
    answers = out.getvalue().splitlines()
    assert len(answers) == 2 and "text mode" in err.getvalue()
    first = _greedy(colibri_run, model_dir / "model.bin", [1, 2], 3)
    assert answers[0] == "".join(f" w{i}" for i in first)


def test_interactive_chat_through_a_pty(model_dir):
    """A person at a terminal: a prompt marker, one answer per line, the KV
    state kept between turns; each answer equals the one-shot reply to the
    same conversation."""
    write_word_tokenizer(model_dir / "model_tokenizer.json", VOCAB - 2)
    _chat_model(model_dir)
    pid, fd = pty.fork()
    if pid == 0:  # the child: colibri-generate on the terminal
        os.execve(sys.executable, [sys.executable, "-m", "colibri_tools.runtime.generate", str(model_dir),
                                   "-i", "--gen", "4", "--ignore-eos", "--threads", "1"],
                  dict(os.environ, PYTHONPATH=str(REPO / "tools")))
    seen = b""

    def read_until(marker: bytes, timeout: float = 60) -> bytes:
        nonlocal seen
        end = time.monotonic() + timeout
        while marker not in seen and time.monotonic() < end:
            if select.select([fd], [], [], 0.5)[0]:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    break
        assert marker in seen, seen
        chunk, seen = seen.split(marker, 1)
        return chunk

    try:
        read_until(b"> ")
        os.write(fd, b"w7 w8\n")
        first = read_until(b"> ").decode().replace("\r", "").splitlines()
        os.write(fd, b"w9\n")
        second = read_until(b"> ").decode().replace("\r", "").splitlines()
        os.write(fd, b"/quit\n")
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert first[0] == "w7 w8" and second[0] == "w9"  # the terminal echoes the input
    want = generate(model_dir, "w7 w8", 4, chat=True, stop_at_eos=False, threads=1)
    assert first[1] == want.text


# ---- errors ---------------------------------------------------------------------------

def test_missing_model_dir(tmp_path, capsys):
    assert main([str(tmp_path / "nope"), "--prompt", "w1"]) == 1
    err = capsys.readouterr().err
    assert "colibri-generate: error:" in err and "model directory not found" in err


def test_model_dir_is_a_file(tmp_path, tiny_image):
    with pytest.raises(GenerateError, match="not a directory"):
        generate(tiny_image, "w1", 1)


def test_missing_tokenizer(model_dir):
    (model_dir / "model_tokenizer.json").unlink()
    with pytest.raises(GenerateError, match="no tokenizer model_tokenizer.json"):
        generate(model_dir, "w1", 1)


def test_missing_image(model_dir):
    (model_dir / "model.bin").unlink()
    with pytest.raises(GenerateError, match="no model image model.bin"):
        generate(model_dir, "w1", 1)


def test_corrupt_tokenizer(model_dir):
    (model_dir / "model_tokenizer.json").write_text("{not json")
    with pytest.raises(GenerateError, match="cannot read the tokenizer"):
        generate(model_dir, "w1", 1)


def test_token_beyond_the_model_names_the_core_status(model_dir):
    # The tokenizer knows more words than the model has ids: the core refuses.
    write_word_tokenizer(model_dir / "model_tokenizer.json", VOCAB + 10)
    with pytest.raises(ColibriError) as info:
        generate(model_dir, f"w1 w{VOCAB + 3}", 2)
    assert "COLIBRI_E_TOKEN_OUT_OF_RANGE" in str(info.value)


def test_bad_image_names_the_status(model_dir, capsys):
    (model_dir / "model.bin").write_bytes(b"not an image" * 40)
    assert main([str(model_dir), "--prompt", "w1"]) == 1
    assert "COLIBRI_E_BAD_MAGIC" in capsys.readouterr().err


def test_empty_prompt(model_dir):
    with pytest.raises(GenerateError, match="encodes to no tokens"):
        generate(model_dir, "", 2)


def test_prompt_longer_than_the_model(model_dir):
    with pytest.raises(GenerateError, match="the prompt is 33 tokens but the model's max_context "
                       "is 32"):
        generate(model_dir, " ".join(["w1"] * 33), 8)


def test_generation_stops_when_the_context_is_full(model_dir, capsys):
    result = generate(model_dir, " ".join(["w1"] * 30), 8, stop_at_eos=False)
    assert result.stop == "context" and len(result.ids) == 3  # positions 30, 31 fed; 3 tokens
    assert main([str(model_dir), "--prompt", " ".join(["w2"] * 30), "--ignore-eos"]) == 0
    assert "the context of 32 positions is full" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["model"],                                    # no --prompt
    ["--prompt", "x"],                            # no MODEL_DIR
    ["model", "--prompt", "x", "--gen", "-1"],
    ["model", "--prompt", "x", "--gen", "two"],
    ["model", "--prompt", "x", "--top-p", "0"],
    ["model", "--prompt", "x", "--temperature", "-1"],
    ["model", "--prompt", "x", "-i"],
])
def test_usage_errors(argv, capsys):
    assert main(argv) == 2
    assert "usage: colibri-generate" in capsys.readouterr().err


def test_option_values_checked_after_parsing(model_dir, capsys):
    assert main([str(model_dir), "--prompt", "w1", "--top-p", "1.5"]) == 2
    assert "top-p must be in (0, 1]" in capsys.readouterr().err


def test_help(capsys):
    assert main(["--help"]) == 0
    assert "MODEL_DIR" in capsys.readouterr().out


# ---- with the converter: a Hugging Face model end to end ------------------------------

def test_converted_model_end_to_end(tmp_path):
    """Checkpoint -> colibri-convert -> colibri-generate gives the ids of
    transformers' greedy generate, and the chat template travels along."""
    torch = pytest.importorskip("torch")
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    model, config = build_model("mixtral", seed=7)
    save_checkpoint(model, tmp_path / "hf")
    write_word_tokenizer(tmp_path / "hf" / "tokenizer.json", config.vocab_size)
    (tmp_path / "hf" / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHATML}))
    model.generation_config.save_pretrained(tmp_path / "hf")
    convert(tmp_path / "hf", tmp_path / "out", context=64, progress=False)
    for name in ("model_tokenizer.json", "model_tokenizer_config.json",
                 "model_generation_config.json"):
        assert (tmp_path / "out" / name).is_file(), name
    prompt = [3, 1, 4, 1, 5]
    result = generate(tmp_path / "out", " ".join(f"w{i}" for i in prompt), 5, stop_at_eos=False)
    assert result.prompt_ids == prompt
    with torch.no_grad():
        want = model.generate(torch.tensor([prompt]), max_new_tokens=5, do_sample=False,
                              pad_token_id=0, eos_token_id=None)[0, len(prompt):].tolist()
    assert result.ids == want
    # a second conversion without the companions removes the stale copies
    (tmp_path / "hf" / "tokenizer_config.json").unlink()
    convert(tmp_path / "hf", tmp_path / "out", context=64, progress=False)
    assert not (tmp_path / "out" / "model_tokenizer_config.json").exists()


def test_a_conversation_runs_only_what_each_turn_adds(model_dir):
    """The KV state is kept between turns: the second turn runs the tokens its
    rendering adds after what the state holds, not the whole conversation."""
    from colibri_tools.runtime.generate import chat_prompt_ids

    write_word_tokenizer(model_dir / "model_tokenizer.json", VOCAB - 2)
    tok = _chat_model(model_dir)
    markers = [tok.token_to_id("<|im_start|>"), tok.token_to_id("<|im_end|>")]
    (model_dir / "model_generation_config.json").write_text(json.dumps({"eos_token_id": markers}))
    with Session(model_dir, sampling=SamplingOptions(), threads=1) as session:
        run_lengths = []
        forward = session.engine.forward
        session.engine.forward = lambda ids, **kw: (run_lengths.append(len(ids)),
                                                    forward(ids, **kw))[1]
        history = [{"role": "user", "content": "w1 w2"}]
        first_ids = chat_prompt_ids(session.model, history)
        reply = session.generate(first_ids, 3)
        history += [{"role": "assistant", "content": reply.text.strip()},
                    {"role": "user", "content": "w3"}]
        second_ids = chat_prompt_ids(session.model, history)
        held = len(session.fed)
        assert second_ids[:held] == session.fed  # the rendering extends what was run
        run_lengths.clear()
        session.generate(second_ids, 1, stop_at_eos=False)
        assert run_lengths == [len(second_ids) - held]
        # a conversation that does not extend the state is run from the start
        run_lengths.clear()
        session.generate(first_ids, 1, stop_at_eos=False)
        assert run_lengths == [len(first_ids)]
