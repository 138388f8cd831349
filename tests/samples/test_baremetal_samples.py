"""The portable bare-metal samples on every emulated board:
isr_forward (colibri_forward from a timer interrupt == thread mode, bit for
bit) and hello_moe with the trained demo model (the text the board prints
== transformers' greedy continuation of the same checkpoint)."""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BOARDS = {"qemu_virt_a72": ("qemu-system-aarch64", "aarch64-linux-gnu-gcc"),
          "qemu_an547": ("qemu-system-arm", "arm-none-eabi-gcc"),
          "qemu_an500": ("qemu-system-arm", "arm-none-eabi-gcc")}
CHECKPOINT = REPO / "models" / "tiny_moe"


def _need(board: str) -> None:
    for tool in BOARDS[board]:
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (scripts/setup.sh installs it)")


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> pathlib.Path:
    """One BUILD folder for the module: another model recompiles only the app
    (ports/baremetal/firmware.mk); each test boots its firmware before the next
    build replaces it."""
    return tmp_path_factory.mktemp("fw")


def _build(board: str, app: str, model_dir: pathlib.Path, build: pathlib.Path) -> pathlib.Path:
    done = subprocess.run(["make", "-s", "firmware", f"BUILD={build}", f"BOARD={board}",
                           f"APP={app}", f"MODEL_DIR={model_dir}"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return build / "fw" / board / app / "firmware.elf"


def _boot(board: str, elf: pathlib.Path, weights: pathlib.Path) -> tuple[int, str]:
    from colibri_tools.board.qemu import launch

    with launch(board, elf, weights, tcp=False, capture=True, timeout=300) as session:
        code = session.wait()
        return code, session.output.decode(errors="replace")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> pathlib.Path:
    sys.path.insert(0, str(REPO / "tests"))
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    root = tmp_path_factory.mktemp("isr_model")
    model, _ = build_model("qwen2_moe", seed=21)
    save_checkpoint(model, root / "hf")
    convert(root / "hf", root / "out", context=64, progress=False)
    return root / "out"


@pytest.mark.parametrize("board", list(BOARDS))
def test_isr_forward_equals_thread_mode(board, tiny_model, build):
    _need(board)
    elf = _build(board, "isr_forward", tiny_model, build)
    code, out = _boot(board, elf, tiny_model / "model.bin")
    assert "thread == interrupt: yes" in out, out
    assert code == 0
    stack = int(out.split("interrupt_stack_bytes=")[1].split()[0])
    assert 0 < stack < 4096


DEMO_PROMPT, DEMO_GEN = "Mr. Darcy", 12
# Leading generated tokens of the quantized demo model (every matrix but the
# routers) that must equal transformers' float32 greedy ones (measured: int8
# 12 of 12, and 32 of 32 over 32; int4 3: "a great deal" where float32 says
# "a very good-natured").
QUANT_AGREEMENT = {"int8": 12, "int4": 3}


def _demo_dir(out: pathlib.Path, quant: str | None = None) -> list[int]:
    """The trained checkpoint converted into out (quantized: every matrix but
    the routers), its vocab header and a prompt header; returns the prompt ids."""
    from colibri_tools.converter.convert import convert
    from colibri_tools.converter.vocab_header import main as vocab_main
    from tokenizers import Tokenizer

    if not (CHECKPOINT / "config.json").exists():
        pytest.skip("models/tiny_moe is not there")
    convert(CHECKPOINT, out, progress=False, quant=quant, quant_attention=quant is not None,
            quant_embeddings=quant is not None)
    assert vocab_main([str(out / "model_tokenizer.json"), "-o", str(out / "model_vocab.h")]) == 0
    ids = Tokenizer.from_file(str(out / "model_tokenizer.json")).encode(DEMO_PROMPT).ids
    (out / "model_prompt.h").write_text(
        f"#define COLIBRI_DEMO_PROMPT_IDS {{{', '.join(map(str, ids))}}}\n"
        f'#define COLIBRI_DEMO_PROMPT_TEXT "{DEMO_PROMPT}"\n'
        f"#define COLIBRI_DEMO_GENERATE {DEMO_GEN}u\n")
    return ids


def _transformers_ids(ids: list[int]) -> list[int]:
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(CHECKPOINT, dtype=torch.float32)
    with torch.no_grad():
        ref = model.eval().generate(torch.tensor([ids]), max_new_tokens=DEMO_GEN,
                                    min_new_tokens=DEMO_GEN, do_sample=False, eos_token_id=None,
                                    pad_token_id=0)
    return ref[0, len(ids):].tolist()


def _decode(model_dir: pathlib.Path, ids: list[int]) -> str:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(model_dir / "model_tokenizer.json")).decode(ids)


def _printed(out: str, board: str) -> str:
    return out.split(f"hello_moe on {board}\n", 1)[1].split("\n", 1)[1].split("\n--\n")[0]


@pytest.fixture(scope="module")
def demo_model(tmp_path_factory) -> tuple[pathlib.Path, list[int], str]:
    """The trained checkpoint converted, its vocab header, a prompt header,
    and transformers' greedy continuation as the expected text."""
    out = tmp_path_factory.mktemp("demo") / "model"
    ids = _demo_dir(out)
    return out, ids, DEMO_PROMPT + _decode(out, _transformers_ids(ids))


@pytest.mark.parametrize("board", ["qemu_an500", "qemu_virt_a72"])
def test_hello_moe_prints_what_transformers_generates(board, demo_model, build):
    _need(board)
    model_dir, _, want = demo_model
    elf = _build(board, "hello_moe", model_dir, build)
    code, out = _boot(board, elf, model_dir / "model.bin")
    assert code == 0, out
    assert _printed(out, board) == want


@pytest.fixture(scope="module", params=["int8", "int4"])
def quant_demo_model(request, tmp_path_factory) -> tuple[str, pathlib.Path, str]:
    """The demo model quantized, and the text Colibri generates from that
    image on this machine (x86 tables); transformers' float32 continuation
    must agree with it for QUANT_AGREEMENT[quant] leading tokens."""
    from colibri_tools.runtime.engine import Engine

    quant = request.param
    out = tmp_path_factory.mktemp(f"demo_{quant}") / "model"
    ids = _demo_dir(out, quant)
    with Engine(out / "model.bin", context=len(ids) + DEMO_GEN) as engine:
        host = engine.greedy(ids, DEMO_GEN)
    want = _transformers_ids(ids)
    same = next((i for i, (a, b) in enumerate(zip(host, want)) if a != b), DEMO_GEN)
    assert same >= QUANT_AGREEMENT[quant], (quant, host, want)
    return quant, out, DEMO_PROMPT + _decode(out, host)


@pytest.mark.parametrize("board", ["qemu_an547", "qemu_an500"])
def test_hello_moe_quantized_prints_what_colibri_prints_here(board, quant_demo_model, build):
    """The quantized image from flash/PSRAM: the board's text (Helium tables on
    the AN547, the reference on the AN500) is the host's, bit for bit."""
    _need(board)
    _, model_dir, want = quant_demo_model
    elf = _build(board, "hello_moe", model_dir, build)
    code, out = _boot(board, elf, model_dir / "model.bin")
    assert code == 0, out
    assert _printed(out, board) == want
