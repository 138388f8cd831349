"""The main job, end to end on Linux: make a small Hugging Face MoE checkpoint
(random weights: nothing can be downloaded here), convert it with
colibri-convert, run it with colibri-run and colibri-generate, and check the
tokens against transformers' own generate on the same checkpoint."""
from __future__ import annotations

import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
OUT = REPO / "out" / "demo"
BIN = REPO / ".venv" / "bin"


def step(title: str, cmd: list[str]) -> str:
    print(f"\n== {title}\n$ {' '.join(cmd)}", flush=True)
    done = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True, check=True)
    print(done.stdout, end="", flush=True)
    return done.stdout


def main() -> int:
    import torch
    from hf_models import build_model, save_checkpoint

    print("== 1. a Qwen3-MoE checkpoint from a transformers config, random weights")
    model, config = build_model("qwen3_moe", seed=1)
    save_checkpoint(model, OUT / "hf")
    print(f"saved {OUT / 'hf'}: hidden={config.hidden_size} layers={config.num_hidden_layers} "
          f"experts={config.num_experts} top_k={config.num_experts_per_tok}")
    step("2. convert", [str(BIN / "colibri-convert"), str(OUT / "hf"), "-o", str(OUT / "model")])
    prompt = [5, 17, 42, 8, 23]
    ids = step("3. run the C engine (Linux port, mmap'd image)",
               [str(REPO / "build/host/colibri-run"), str(OUT / "model/model.bin"),
                "--ids", ",".join(map(str, prompt)), "--gen", "16", "--verify", "--stats"])
    step("4. text in, text out (tokenizer from the checkpoint)",
         [str(BIN / "colibri-generate"), str(OUT / "model"), "--prompt", "the small bird",
          "--gen", "12", "--show-ids"])
    with torch.no_grad():
        want = model.generate(torch.tensor([prompt]), max_new_tokens=16, min_new_tokens=16,
                              do_sample=False, pad_token_id=0, eos_token_id=None)
    want_ids = want[0, len(prompt):].tolist()
    got_ids = [int(t) for t in ids.split()]
    print("\n== 5. the same 16 greedy tokens from transformers")
    print("transformers:", " ".join(map(str, want_ids)))
    print("colibri:     ", " ".join(map(str, got_ids)))
    print("MATCH" if got_ids == want_ids else "MISMATCH")
    return 0 if got_ids == want_ids else 1


if __name__ == "__main__":
    sys.exit(main())
