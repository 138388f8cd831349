"""colibri-train-tiny: train a small Mixture-of-Experts language model on a text file.

    colibri-train-tiny --text austen.txt --out models/tiny_moe --steps 1000

It trains, on the CPU and in one process, the two things a demo needs:

* a `tokenizers` BPE tokenizer over the text's own characters (no byte-level
  mapping, no normalizer) whose decoder is `Fuse`: decoding is the plain
  concatenation of the token strings, so firmware can print text from a token
  table (see `colibri-vocab`);
* a real Hugging Face MoE model (Mixtral or Qwen3-MoE) with random initial
  weights, trained with AdamW on random windows of the text, a load-balancing
  router loss, a cosine learning rate, and a fixed seed.

The last `val_fraction` of the text (whole lines) is held out for the
validation loss and is not seen by the tokenizer either. The output directory
gets `config.json`, `model.safetensors` (bfloat16 by default), `generation_config.json`,
`tokenizer.json` and `training.json` (the options, the text's SHA-256, the
measured losses and a greedy sample): what `colibri-convert` reads, plus the record.

Library first: :func:`train` does the work and returns a :class:`TrainResult`;
:func:`main` is the console script. Every failure is a :class:`TrainError`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import ColibriError
from ..version import add_version_option

SPECIAL_TOKENS = ("<|endoftext|>", "<unk>")  # ids 0 and 1
# Words keep their leading space; digits stand alone; runs of punctuation and of
# white space are pieces of their own. Encoding only: decode stays concatenation.
PIECE_PATTERN = r" ?\p{L}+| ?\p{N}| ?[^\s\p{L}\p{N}]+|\s+"
FAMILIES = ("mixtral", "qwen3_moe")
DTYPES = ("bfloat16", "float16", "float32")
TRAINING_RECORD = "training.json"
SAMPLE_PROMPT = "It is a truth universally acknowledged"
SAMPLE_TOKENS = 48


class TrainError(ColibriError):
    """The text or the options cannot train a model (too short, bad sizes...)."""


@dataclass(frozen=True)
class ModelShape:
    """The architecture: sizes of the Hugging Face config."""

    family: str = "mixtral"
    vocab_size: int = 512       # tokenizer size asked for (the config gets the real one)
    hidden_size: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 32
    n_experts: int = 4
    top_k: int = 2
    expert_width: int = 192     # intermediate size of one expert
    context: int = 256          # max_position_embeddings


@dataclass(frozen=True)
class TrainOptions:
    """How to train: steps, batch, optimiser, evaluation, output precision."""

    steps: int = 1000
    batch: int = 16
    seq_len: int = 256
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup: int = 50
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    aux_loss_coef: float = 0.02
    seed: int = 0
    val_fraction: float = 0.05
    eval_every: int = 100
    eval_windows: int = 48      # validation windows at each periodic evaluation
    threads: int = 1           # 2 threads spin-wait badly when other jobs share the CPU
    dtype: str = "bfloat16"
    sample_prompt: str = SAMPLE_PROMPT
    sample_tokens: int = SAMPLE_TOKENS


@dataclass
class TrainResult:
    """What :func:`train` measured; also written to training.json."""

    out_dir: str
    vocab_size: int
    parameters: int
    train_tokens: int
    val_tokens: int
    chars_per_token: float
    seconds: float
    first_loss: float              # LM loss of the first step
    final_train_loss: float        # mean LM loss over the last min(50, steps) steps
    val_loss: float                # whole validation split, float32 weights
    val_loss_saved: float          # the same with the weights rounded to the saved dtype
    val_perplexity_saved: float
    sample_prompt: str
    sample_ids: list[int]
    sample_text: str
    history: list[dict[str, float]] = field(default_factory=list)


# ---- text and tokenizer -------------------------------------------------------------

def read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TrainError(f"not UTF-8 text: {exc}", path=path, offset=exc.start) from exc
    except OSError as exc:
        raise TrainError(f"cannot read the text: {exc.strerror or exc}", path=path) from exc


def split_text(text: str, val_fraction: float) -> tuple[str, str]:
    """(train, validation): the validation part is the last whole lines of the text."""
    lines = text.splitlines(keepends=True)
    n_val = round(len(lines) * val_fraction)
    if not 0 <= val_fraction < 1 or len(lines) - n_val < 1 or (val_fraction > 0 and n_val < 1):
        raise TrainError(f"cannot hold out {val_fraction:g} of a text of {len(lines)} lines")
    cut = len(lines) - n_val
    return "".join(lines[:cut]), "".join(lines[cut:])


def train_tokenizer(text: str, vocab_size: int) -> Any:
    """A character BPE tokenizer of at most vocab_size tokens whose decode concatenates."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    alphabet = sorted(set(text))
    if vocab_size < len(SPECIAL_TOKENS) + len(alphabet):
        raise TrainError(f"vocab_size {vocab_size} is smaller than the text's "
                         f"{len(alphabet)} characters plus {len(SPECIAL_TOKENS)} special tokens")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(PIECE_PATTERN), behavior="isolated")
    tok.decoder = decoders.Fuse()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=alphabet, limit_alphabet=len(alphabet),
                                  show_progress=False)
    tok.train_from_iterator(text.splitlines(keepends=True), trainer)
    return tok


def encode(tokenizer: Any, text: str) -> Any:
    """The token ids of text as a 1-D int64 tensor (line by line, then joined)."""
    import torch

    pieces = tokenizer.encode_batch(text.splitlines(keepends=True), add_special_tokens=False)
    return torch.tensor([i for piece in pieces for i in piece.ids], dtype=torch.int64)


# ---- model --------------------------------------------------------------------------

def hf_config(shape: ModelShape, vocab_size: int, aux_loss_coef: float) -> Any:
    """The transformers config of `shape` with the tokenizer's real vocabulary size."""
    from transformers import MixtralConfig, Qwen3MoeConfig

    common = dict(vocab_size=vocab_size, hidden_size=shape.hidden_size,
                  num_hidden_layers=shape.n_layers, num_attention_heads=shape.n_heads,
                  num_key_value_heads=shape.n_kv_heads, head_dim=shape.head_dim,
                  num_experts_per_tok=shape.top_k, max_position_embeddings=shape.context,
                  rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=0,
                  eos_token_id=0, pad_token_id=None, router_aux_loss_coef=aux_loss_coef,
                  output_router_logits=False,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    if shape.family == "mixtral":
        return MixtralConfig(intermediate_size=shape.expert_width,
                             num_local_experts=shape.n_experts, **common)
    if shape.family == "qwen3_moe":
        return Qwen3MoeConfig(intermediate_size=shape.expert_width,
                              moe_intermediate_size=shape.expert_width,
                              num_experts=shape.n_experts, norm_topk_prob=True,
                              decoder_sparse_step=1, **common)
    raise TrainError(f"family {shape.family!r}: one of {', '.join(FAMILIES)}")


def build_model(config: Any, seed: int) -> Any:
    """A freshly initialised float32 model for `config`, the same for the same seed."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Grouped matmuls are ~5x faster than the per-expert loop on CPU for training.
    model.config._experts_implementation = "grouped_mm"
    model.config._attn_implementation = "sdpa"
    return model


def parameter_groups(model: Any, weight_decay: float) -> list[dict[str, Any]]:
    """Decay matrices (projections, experts, embeddings); not norms or biases."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def learning_rate(step: int, options: TrainOptions) -> float:
    """Linear warmup, then cosine decay to min_lr_ratio * lr at the last step."""
    if step < options.warmup:
        return options.lr * (step + 1) / options.warmup
    span = max(options.steps - options.warmup, 1)
    cosine = 0.5 * (1 + math.cos(math.pi * min(step - options.warmup, span) / span))
    return options.lr * (options.min_lr_ratio + (1 - options.min_lr_ratio) * cosine)


def lm_loss(model: Any, windows: Any, with_router: bool = False) -> tuple[Any, Any]:
    """(next-token cross entropy, router load-balancing loss or None) of [B, T+1] windows."""
    import torch.nn.functional as F

    out = model(input_ids=windows[:, :-1], use_cache=False, output_router_logits=with_router)
    logits = out.logits
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                           windows[:, 1:].reshape(-1))
    return loss, (out.aux_loss if with_router else None)


def random_windows(ids: Any, batch: int, seq_len: int, gen: Any) -> Any:
    """[batch, seq_len + 1] windows at random offsets of ids."""
    import torch

    starts = torch.randint(0, len(ids) - seq_len, (batch,), generator=gen)
    return torch.stack([ids[s:s + seq_len + 1] for s in starts.tolist()])


def evaluate(model: Any, ids: Any, seq_len: int, max_windows: int | None = None,
             batch: int = 16) -> float:
    """Mean next-token loss over consecutive non-overlapping windows of ids."""
    import torch

    n = (len(ids) - 1) // seq_len
    if max_windows is not None:
        n = min(n, max_windows)
    if n < 1:
        raise TrainError(f"the validation text has {len(ids)} tokens, fewer than "
                         f"seq_len + 1 = {seq_len + 1}")
    windows = torch.stack([ids[i * seq_len:(i + 1) * seq_len + 1] for i in range(n)])
    total = 0.0
    model.eval()
    with torch.no_grad():
        for first in range(0, n, batch):
            part = windows[first:first + batch]
            total += lm_loss(model, part)[0].item() * len(part)
    model.train()
    return total / n


def greedy(model: Any, prompt_ids: Sequence[int], n: int) -> list[int]:
    """n greedy next tokens after prompt_ids (full recompute each step: small and exact)."""
    import torch

    ids = list(prompt_ids)
    model.eval()
    with torch.no_grad():
        for _ in range(n):
            logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits
            ids.append(int(logits[0, -1].argmax()))
    return ids[len(prompt_ids):]


# ---- training -----------------------------------------------------------------------

def _check(shape: ModelShape, options: TrainOptions) -> None:
    if shape.family not in FAMILIES:
        raise TrainError(f"family {shape.family!r}: one of {', '.join(FAMILIES)}")
    if options.dtype not in DTYPES:
        raise TrainError(f"dtype {options.dtype!r}: one of {', '.join(DTYPES)}")
    if not 1 <= shape.top_k <= shape.n_experts:
        raise TrainError(f"top_k {shape.top_k} must be 1 .. n_experts ({shape.n_experts})")
    if shape.n_heads % shape.n_kv_heads:
        raise TrainError(f"n_heads {shape.n_heads} is not a multiple of n_kv_heads "
                         f"{shape.n_kv_heads}")
    if not 1 <= options.seq_len <= shape.context:
        raise TrainError(f"seq_len {options.seq_len} must be 1 .. context ({shape.context})")
    if options.steps < 1 or options.batch < 1:
        raise TrainError("steps and batch must be at least 1")


def _rounded_copy(model: Any, dtype: str) -> Any:
    """A float32 model whose weights went through `dtype` (what the saved file holds)."""
    import copy

    import torch

    clone = copy.deepcopy(model)
    with torch.no_grad():
        for p in clone.parameters():
            p.copy_(p.to(getattr(torch, dtype)).float())
    return clone


def _save(model: Any, tokenizer: Any, out_dir: Path, dtype: str) -> None:
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.config._experts_implementation = "eager"  # portable default for whoever loads it
    model.to(getattr(torch, dtype)).save_pretrained(out_dir)
    model.float()
    tokenizer.save(str(out_dir / "tokenizer.json"))


def _optimise(model: Any, train_ids: Any, val_ids: Any, options: TrainOptions,
              log: Callable[[str], None]) -> list[dict[str, float]]:
    import torch

    gen = torch.Generator().manual_seed(options.seed)
    opt = torch.optim.AdamW(parameter_groups(model, options.weight_decay), lr=options.lr,
                            betas=(0.9, 0.95), eps=1e-8)
    history: list[dict[str, float]] = []
    model.train()
    start = time.monotonic()
    for step in range(options.steps):
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, options)
        windows = random_windows(train_ids, options.batch, options.seq_len, gen)
        loss, aux = lm_loss(model, windows, with_router=True)
        total = loss + options.aux_loss_coef * aux if aux is not None else loss
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), options.grad_clip)
        opt.step()
        row = {"step": step + 1, "loss": loss.item(),
               "aux": aux.item() if aux is not None else 0.0}
        if (step + 1) % options.eval_every == 0 or step + 1 == options.steps:
            row["val_loss"] = evaluate(model, val_ids, options.seq_len, options.eval_windows)
            log(f"step {step + 1}/{options.steps}: loss {row['loss']:.4f} val {row['val_loss']:.4f} "
                f"aux {row['aux']:.3f} lr {learning_rate(step, options):.2e} "
                f"({time.monotonic() - start:.0f} s)")
        history.append(row)
    return history


def train(text: str, out_dir: str | Path, shape: ModelShape = ModelShape(),
          options: TrainOptions = TrainOptions(),
          log: Callable[[str], None] = lambda _: None) -> TrainResult:
    """Train tokenizer and model on text, save both in out_dir, return the measurements."""
    import torch

    _check(shape, options)
    threads = torch.get_num_threads()
    torch.set_num_threads(options.threads)
    try:
        return _train(text, Path(out_dir), shape, options, log)
    finally:
        torch.set_num_threads(threads)


def _train(text: str, out: Path, shape: ModelShape, options: TrainOptions,
           log: Callable[[str], None]) -> TrainResult:
    started = time.monotonic()
    train_text, val_text = split_text(text, options.val_fraction)
    tokenizer = train_tokenizer(train_text, shape.vocab_size)
    train_ids, val_ids = encode(tokenizer, train_text), encode(tokenizer, val_text)
    if len(train_ids) <= options.seq_len:
        raise TrainError(f"the training text has {len(train_ids)} tokens, not more than "
                         f"seq_len {options.seq_len}")
    log(f"tokenizer: {tokenizer.get_vocab_size()} tokens, {len(train_text) / len(train_ids):.2f} "
        f"characters per token; {len(train_ids)} training and {len(val_ids)} validation tokens")
    config = hf_config(shape, tokenizer.get_vocab_size(), options.aux_loss_coef)
    model = build_model(config, options.seed)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {shape.family}, {n_params} parameters")
    history = _optimise(model, train_ids, val_ids, options, log)
    val_loss = evaluate(model, val_ids, options.seq_len)
    saved = _rounded_copy(model, options.dtype)
    val_saved = evaluate(saved, val_ids, options.seq_len)
    prompt = tokenizer.encode(options.sample_prompt, add_special_tokens=False).ids
    sample = greedy(saved, prompt, options.sample_tokens)
    _save(model, tokenizer, out, options.dtype)
    tail = history[-min(50, len(history)):]
    result = TrainResult(
        out_dir=str(out), vocab_size=tokenizer.get_vocab_size(), parameters=n_params,
        train_tokens=len(train_ids), val_tokens=len(val_ids),
        chars_per_token=round(len(train_text) / len(train_ids), 4),
        seconds=round(time.monotonic() - started, 1), first_loss=history[0]["loss"],
        final_train_loss=sum(r["loss"] for r in tail) / len(tail), val_loss=val_loss,
        val_loss_saved=val_saved, val_perplexity_saved=math.exp(val_saved),
        sample_prompt=options.sample_prompt, sample_ids=sample,
        sample_text=tokenizer.decode(sample), history=history)
    _write_record(out / TRAINING_RECORD, result, shape, options, text)
    return result


def _write_record(path: Path, result: TrainResult, shape: ModelShape, options: TrainOptions,
                  text: str) -> None:
    import tokenizers
    import torch
    import transformers

    record = {
        "text": {"sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                 "characters": len(text)},
        "shape": asdict(shape), "options": asdict(options),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__},
        "result": {k: v for k, v in asdict(result).items() if k not in ("history", "out_dir")},
        "history": [r for r in result.history if "val_loss" in r],
    }
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


# ---- command line -------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    shape, opts = ModelShape(), TrainOptions()
    p = argparse.ArgumentParser(prog="colibri-train-tiny", description="Train a small MoE "
                                "language model and its tokenizer on a UTF-8 text file (CPU).")
    p.add_argument("--text", type=Path, required=True, help="UTF-8 training text")
    p.add_argument("--out", type=Path, required=True, help="output checkpoint directory")
    for name, default in asdict(shape).items():
        p.add_argument("--" + name.replace("_", "-"), type=type(default), default=default,
                       choices=FAMILIES if name == "family" else None,
                       help=f"model: {name} (default {default})")
    for name, default in asdict(opts).items():
        p.add_argument("--" + name.replace("_", "-"), type=type(default), default=default,
                       choices=DTYPES if name == "dtype" else None,
                       help=f"training: {name} (default {default})")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    add_version_option(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    values = vars(args)
    shape = replace(ModelShape(), **{k: values[k] for k in asdict(ModelShape())})
    options = replace(TrainOptions(), **{k: values[k] for k in asdict(TrainOptions())})
    log = (lambda _: None) if args.quiet else (lambda line: print(line, flush=True))
    try:
        result = train(read_text(args.text), args.out, shape, options, log)
    except ColibriError as exc:
        print(f"colibri-train-tiny: error: {exc}", file=sys.stderr)
        return 1
    print(f"train loss {result.final_train_loss:.4f}, validation loss {result.val_loss:.4f} "
          f"(saved {options.dtype}: {result.val_loss_saved:.4f}, perplexity "
          f"{result.val_perplexity_saved:.2f}) in {result.seconds:.0f} s")
    print(f"greedy: {result.sample_prompt!r} -> {result.sample_text!r}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
