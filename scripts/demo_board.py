"""The main job on an emulated board: the trained demo MoE model
(models/tiny_moe, a Mixtral-architecture checkpoint) is converted, its
weights made into an Intel HEX image at the board's weight address, the
hello_moe firmware built for the board, and the board booted in QEMU; its
serial console shows the model generating text from the weights in "flash".
Then transformers runs the same checkpoint and the texts are compared.

    scripts/demo.sh [--board qemu_virt_a72|qemu_an547|qemu_an500] [--prompt TEXT] [--gen N]
                    [--quant int8|int4]
    scripts/demo.sh --paged [--board qemu_an547|qemu_virt_a72] [--prompt TEXT] [--gen N]
                    [--slots N] [--pins N] [--no-verify]

With --quant every matrix but the routers is Q8 or Q4 (colibri-convert
--quant ... --quant-attention --quant-embeddings): the board must then print
what Colibri prints on this machine from the same image (the same bits on
every kernel table), and the script reports how many generated tokens agree
with transformers' float32 continuation.

With --paged the model is models/paged_moe, whose routed experts (14 MB in
float32) are several times the board's RAM: nothing of it is in the board's
address map. The paged_moe firmware reads the image's start into RAM and
the experts, as the router picks them, into an expert cache of as many slots
as the RAM holds beside the rest (colibri-board fit), through semihosting
file reads; the experts a routing profile of another prompt uses most are
pinned. Per token it prints the bytes read from storage, the cache's hits
and the instructions; the text must match transformers'.
"""
from __future__ import annotations

import argparse
import pathlib
import shlex
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
BIN = REPO / ".venv" / "bin"
CHECKPOINT = REPO / "models" / "tiny_moe"
PAGED_CHECKPOINT = REPO / "models" / "paged_moe"
PROFILE_PROMPT = "Mr. Darcy said"  # the routing profile's prompt: not the one generated from


def step(title: str, cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    print(f"\n== {title}\n$ {shlex.join(cmd)}", flush=True)
    return subprocess.run(cmd, cwd=REPO, check=True, **kwargs)


def write_prompt_header(model_dir: pathlib.Path, prompt: str, gen: int) -> list[int]:
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(model_dir / "model_tokenizer.json")).encode(prompt).ids
    text = prompt.encode("unicode_escape").decode("ascii").replace('"', '\\"')
    (model_dir / "model_prompt.h").write_text(
        "/* Written by scripts/demo_board.py: the demo prompt, tokenized on the host. */\n"
        "#ifndef COLIBRI_MODEL_PROMPT_H\n#define COLIBRI_MODEL_PROMPT_H\n"
        f"#define COLIBRI_DEMO_PROMPT_IDS {{{', '.join(map(str, ids))}}}\n"
        f'#define COLIBRI_DEMO_PROMPT_TEXT "{text}"\n'
        f"#define COLIBRI_DEMO_GENERATE {gen}u\n#endif\n")
    print(f"prompt {prompt!r} -> {len(ids)} token ids", flush=True)
    return ids


def reference_ids(prompt_ids: list[int], gen: int, checkpoint: pathlib.Path = CHECKPOINT
                  ) -> list[int]:
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    with torch.no_grad():
        out = model.eval().generate(torch.tensor([prompt_ids]), max_new_tokens=gen,
                                    min_new_tokens=gen, do_sample=False, eos_token_id=None,
                                    pad_token_id=0)
    return out[0, len(prompt_ids):].tolist()


def decode(model_dir: pathlib.Path, ids: list[int]) -> str:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(model_dir / "model_tokenizer.json")).decode(ids)


def console_text(console: str, prompt: str) -> str:
    """The generated text hello_moe printed: after the prompt, before '\\n--'."""
    body = console.split(prompt, 1)[-1]
    return body.split("\n--\n", 1)[0]


def host_ids(model_dir: pathlib.Path, prompt_ids: list[int], gen: int) -> list[int]:
    """Colibri's greedy continuation of the image on this machine."""
    from colibri_tools.runtime.engine import Engine

    with Engine(model_dir / "model.bin", context=len(prompt_ids) + gen) as engine:
        return engine.greedy(prompt_ids, gen)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--board", help="default qemu_virt_a72 (--paged: qemu_an547)")
    p.add_argument("--prompt", default="It is a truth universally acknowledged")
    p.add_argument("--gen", type=int, default=64)
    p.add_argument("--quant", choices=["int8", "int4"], help="quantized weights")
    p.add_argument("--paged", action="store_true", help="models/paged_moe, its experts paged "
                   "from storage into an expert cache (paged_moe firmware)")
    p.add_argument("--slots", type=int, help="--paged: expert cache slots (default: what the "
                   "board's RAM holds, colibri-board fit)")
    p.add_argument("--pins", type=int, help="--paged: slots pinned to the profile's most used "
                   "experts (default: half)")
    p.add_argument("--no-verify", action="store_true", help="--paged: trust the storage (no "
                   "CRC-32 check of each expert block read)")
    args = p.parse_args(argv)
    if args.paged:
        from demo_paged import paged_demo

        return paged_demo(args)
    args.board = args.board or "qemu_virt_a72"
    out = REPO / "out" / "demo_board" / (args.board + (f"-{args.quant}" if args.quant else ""))
    quant = ["--quant", args.quant, "--quant-attention", "--quant-embeddings"] if args.quant else []
    model_dir, fw = out / "model", REPO / "build" / "fw" / args.board / "hello_moe"
    step("1. convert the trained checkpoint", [str(BIN / "colibri-convert"), str(CHECKPOINT),
                                               "-o", str(model_dir), "--quiet", *quant])
    step("2. token strings for the firmware", [str(BIN / "colibri-vocab"),
                                               str(model_dir / "model_tokenizer.json"),
                                               "-o", str(model_dir / "model_vocab.h")])
    prompt_ids = write_prompt_header(model_dir, args.prompt, args.gen)
    step(f"3. build hello_moe for {args.board}",
         ["make", "-s", "firmware", f"BOARD={args.board}", "APP=hello_moe",
          f"MODEL_DIR={model_dir.relative_to(REPO)}"])
    print((fw / "size.txt").read_text().split("\n\n")[0], flush=True)
    print(f"model.bin: {(model_dir / 'model.bin').stat().st_size} bytes", flush=True)
    step("4. weights as Intel HEX at the board's weight address",
         [str(BIN / "colibri-image"), str(model_dir / "model.bin"), "--board", args.board,
          "-o", str(out / "weights.hex")])
    run = step(f"5. boot {args.board} in QEMU with the weights in its memory map",
               [str(BIN / "colibri-flash"), "--board", args.board, "--backend", "qemu",
                "--firmware", str(fw / "firmware.elf"), "--weights", str(out / "weights.hex"),
                "--timeout", "600"], stdout=subprocess.PIPE, text=True)
    print(run.stdout, flush=True)
    want_ids = reference_ids(prompt_ids, args.gen)
    want = decode(model_dir, want_ids)
    got = console_text(run.stdout, args.prompt.replace("\n", " "))
    print("== 6. the same continuation from transformers on the checkpoint")
    print(repr(want))
    if args.quant:
        return quantized_verdict(model_dir, prompt_ids, args.gen, got, want_ids)
    print("MATCH" if got == want else f"MISMATCH: board printed {got!r}")
    return 0 if got == want else 1


def quantized_verdict(model_dir: pathlib.Path, prompt_ids: list[int], gen: int, got: str,
                      want_ids: list[int]) -> int:
    """A quantized board run: the board's text must be this machine's; how
    many leading tokens agree with float32 transformers is reported."""
    ids = host_ids(model_dir, prompt_ids, gen)
    host = decode(model_dir, ids)
    print(f"== 7. Colibri on this machine, same image\n{host!r}")
    same = next((i for i, (a, b) in enumerate(zip(ids, want_ids)) if a != b), gen)
    print(f"first {same} of {gen} generated tokens as transformers float32")
    print("MATCH (board == host)" if got == host else f"MISMATCH: board printed {got!r}")
    return 0 if got == host else 1


if __name__ == "__main__":
    sys.exit(main())
