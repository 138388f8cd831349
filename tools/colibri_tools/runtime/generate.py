"""colibri-generate: text in, text out, with the C engine in this process
(colibri_tools.runtime.engine: ctypes over libcolibri, no colibri-run subprocess).

    colibri-generate MODEL_DIR --prompt TEXT [--gen N] [--temperature T --top-k K --top-p P
                     --repetition-penalty R --seed S] [--chat [--system TEXT]] [--stats]
    colibri-generate MODEL_DIR --interactive [--chat]

MODEL_DIR is a colibri-convert output: ``model.bin``, ``model_tokenizer.json``
and, when the checkpoint had them, ``model_tokenizer_config.json`` (special
tokens, the chat template), ``model_chat_template.jinja`` and
``model_generation_config.json`` (EOS ids, sampling defaults).

What it does: encodes the prompt (or renders a conversation through the chat
template, as transformers' apply_chat_template does: colibri_tools.runtime.chat),
runs it, then picks tokens one at a time (colibri_tools.runtime.sampling: greedy by
default, or temperature / top-k / top-p / repetition penalty with a seed,
reproducible), prints the text as it comes (streaming), and stops at an EOS
token (not printed), after --gen tokens, or when the context is full.
--interactive reads one line at a time from stdin and answers each: a
conversation when the model has a chat template (the KV state is kept and
only new tokens are run), else a continued text.

Library first: :func:`generate` returns a :class:`Generation`; :class:`Session`
keeps a model open for several turns; :func:`main` is the console script.
Every failure is a :class:`GenerateError` or another ColibriError.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ..errors import ColibriError, OptionError
from ..version import add_version_option
from .chat import GENERATION_CONFIG, TOKENIZER_CONFIG, ChatTemplate, read_json, special_tokens
from .engine import DEFAULT_CONTEXT, Engine
from .sampling import Sampler, SamplingOptions

PROG = "colibri-generate"
MODEL_FILE = "model.bin"
TOKENIZER_FILE = "model_tokenizer.json"
DEFAULT_GEN = 32
HOLD = "\ufffd"  # what decode shows for an incomplete UTF-8 sequence: wait for the next token


class GenerateError(ColibriError):
    """colibri-generate could not turn the prompt into text (a missing model or
    tokenizer, an empty prompt, a prompt longer than the context)."""


@dataclass
class Generation:
    """What one generation produced."""

    prompt_ids: list[int]     # the tokens run before the first generated one
    ids: list[int] = field(default_factory=list)  # generated ids (an EOS that stopped it: not here)
    text: str = ""            # the generated text, as streamed
    stop: str = "length"      # "eos", "length" (--gen reached) or "context" (context full)
    seed: int = 0
    prompt_ns: int = 0        # the prompt's forward call(s)
    token_ns: list[int] = field(default_factory=list)  # each decode step's forward call


def model_files(model_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(image, tokenizer) paths of a converter output directory, checked."""
    d = Path(model_dir)
    if not d.exists():
        raise GenerateError("model directory not found", path=d)
    if not d.is_dir():
        raise GenerateError(
            f"not a directory: pass the directory holding {MODEL_FILE} and {TOKENIZER_FILE}",
            path=d)
    image, tokenizer = d / MODEL_FILE, d / TOKENIZER_FILE
    if not image.is_file():
        raise GenerateError(f"no model image {MODEL_FILE} in the model directory (convert a "
                            "checkpoint with colibri-convert first)", path=image)
    if not tokenizer.is_file():
        raise GenerateError(f"no tokenizer {TOKENIZER_FILE} in the model directory "
                            "(colibri-convert writes it when the checkpoint has a tokenizer.json)",
                            path=tokenizer)
    return image, tokenizer


def load_tokenizer(path: str | os.PathLike[str]) -> Any:
    """A `tokenizers.Tokenizer` read from a tokenizer.json file."""
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises plain Exception subclasses
        raise GenerateError(f"cannot read the tokenizer: {exc}", path=path) from exc


def _ids_of(value: Any) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


@dataclass(frozen=True)
class ModelDir:
    """A converter output directory and what generation needs from it."""

    path: Path
    image: Path
    tokenizer: Any
    eos_ids: frozenset[int]
    template: ChatTemplate | None
    defaults: SamplingOptions  # from model_generation_config.json (greedy if do_sample is off)

    @classmethod
    def open(cls, model_dir: str | os.PathLike[str]) -> ModelDir:
        image, tok_path = model_files(model_dir)
        d = Path(model_dir)
        tokenizer = load_tokenizer(tok_path)
        gen_config = read_json(d / GENERATION_CONFIG)
        tok_config = read_json(d / TOKENIZER_CONFIG)
        eos = set(_ids_of(gen_config.get("eos_token_id")))
        eos_text = special_tokens(tok_config).get("eos_token")
        if not eos and eos_text is not None and tokenizer.token_to_id(eos_text) is not None:
            eos.add(tokenizer.token_to_id(eos_text))
        return cls(d, image, tokenizer, frozenset(eos), ChatTemplate.from_model_dir(d),
                   sampling_defaults(gen_config))


def sampling_defaults(gen_config: dict[str, Any]) -> SamplingOptions:
    """transformers' defaults for what generation_config.json leaves out: sampling
    only with do_sample (temperature 1, top-k 50, top-p 1), else greedy."""
    def number(key: str, default: float) -> float:
        value = gen_config.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else default

    penalty = number("repetition_penalty", 1.0)
    if not gen_config.get("do_sample"):
        return SamplingOptions(repetition_penalty=penalty)
    return SamplingOptions(temperature=number("temperature", 1.0), top_k=int(number("top_k", 50)),
                           top_p=number("top_p", 1.0), repetition_penalty=penalty)


class TextStream:
    """Turns generated ids into text pieces: the decode of (context + ids) beyond
    the decode of the context, so a word's leading space and a character split
    over byte tokens come out right; text ending in U+FFFD waits for more."""

    def __init__(self, tokenizer: Any, context: Sequence[int]) -> None:
        self.tokenizer, self.context = tokenizer, list(context)
        self.base = self._decode(self.context)
        self.emitted = ""

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def text(self, ids: Sequence[int]) -> str:
        full = self._decode(self.context + list(ids))
        if full.startswith(self.base):
            return full[len(self.base):]
        return self._decode(ids)

    def piece(self, ids: Sequence[int], final: bool = False) -> str:
        """New text since the last call (all of it when final)."""
        text = self.text(ids)
        if not final and text.endswith(HOLD):
            return ""
        if not text.startswith(self.emitted):
            return ""  # decode changed earlier text: nothing can be taken back
        new, self.emitted = text[len(self.emitted):], text
        return new


class Session:
    """A model open for generation: its engine, tokenizer, sampler and the ids
    its KV state holds (so a conversation only runs what is new)."""

    def __init__(self, model_dir: str | os.PathLike[str], *, sampling: SamplingOptions | None = None,
                 context: int | None = None, threads: int | None = None, mlock: bool = False,
                 stats: bool = False, memory_budget: int | None = None,
                 expert_slots: int | None = None) -> None:
        self.model = ModelDir.open(model_dir)
        self.sampler = Sampler(sampling if sampling is not None else self.model.defaults)
        self.engine = Engine(self.model.image, context=context, threads=threads, mlock=mlock,
                             routes=stats, memory_budget=memory_budget,
                             expert_slots=expert_slots)
        self.fed: list[int] = []  # ids in the KV state, in order

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self.model.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)

    def _feed(self, ids: list[int]) -> tuple[np.ndarray, int]:
        """Run ids after what the state holds (reusing the longest common prefix
        the state already has, else from a fresh state): the last logits, ns."""
        keep = len(self.fed) if ids[:len(self.fed)] == self.fed and len(ids) > len(self.fed) else 0
        if keep == 0:
            self.engine.reset()
            self.fed = []
        new = ids[keep:]
        if len(ids) > self.engine.context:
            raise GenerateError(f"the prompt needs {len(ids)} positions but the context holds "
                                f"{self.engine.context} (raise --context, up to the model's "
                                f"{self.engine.hparams['max_context']})", path=self.model.image)
        start = time.perf_counter_ns()
        logits = self.engine.forward(new)
        elapsed = time.perf_counter_ns() - start
        self.fed = list(ids)
        return logits, elapsed

    def generate(self, prompt_ids: Sequence[int], max_new: int, *, stop_at_eos: bool = True,
                 on_text: Callable[[str], None] | None = None) -> Generation:
        """Run prompt_ids, then up to max_new tokens; on_text gets the text as it comes."""
        prompt_ids = list(prompt_ids)
        if not prompt_ids:
            raise GenerateError("the prompt encodes to no tokens; give a longer prompt")
        result = Generation(prompt_ids=prompt_ids, seed=self.sampler.seed)
        if max_new <= 0:
            self._feed(prompt_ids)
            return result
        logits, result.prompt_ns = self._feed(prompt_ids)
        stream = TextStream(self.model.tokenizer, prompt_ids)
        while True:
            token = self.sampler.next(logits, self.fed)
            if stop_at_eos and token in self.model.eos_ids:
                result.stop = "eos"
                break
            result.ids.append(token)
            piece = stream.piece(result.ids)
            if piece and on_text is not None:
                on_text(piece)
            if len(result.ids) >= max_new:
                break
            if self.engine.pos >= self.engine.context:
                result.stop = "context"
                break
            start = time.perf_counter_ns()
            logits = self.engine.forward([token])
            result.token_ns.append(time.perf_counter_ns() - start)
            self.fed.append(token)
        last = stream.piece(result.ids, final=True)
        if last and on_text is not None:
            on_text(last)
        result.text = stream.emitted
        return result


def generate(model_dir: str | os.PathLike[str], prompt: str, gen: int = DEFAULT_GEN, *,
             sampling: SamplingOptions | None = None, chat: bool = False,
             system: str | None = None, stop_at_eos: bool = True, add_special_tokens: bool = True,
             context: int | None = None, threads: int | None = None, mlock: bool = False,
             on_text: Callable[[str], None] | None = None) -> Generation:
    """Generate up to `gen` tokens after `prompt` (or, with chat, as the reply
    to it as a user message) with the model in `model_dir`."""
    if gen < 0:
        raise GenerateError(f"gen must be >= 0, got {gen}")
    model = ModelDir.open(model_dir)
    if chat:
        prompt_ids = chat_prompt_ids(model, conversation(prompt, system))
    else:
        prompt_ids = list(model.tokenizer.encode(prompt, add_special_tokens=add_special_tokens).ids)
    if not prompt_ids:
        raise GenerateError("the prompt encodes to no tokens; give a longer prompt")
    context = context or _context_for(model, len(prompt_ids), gen)
    with Session(model_dir, sampling=sampling, context=context, threads=threads,
                 mlock=mlock) as session:
        return session.generate(prompt_ids, gen, stop_at_eos=stop_at_eos, on_text=on_text)


def conversation(prompt: str, system: str | None = None) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system}] if system else []
    return messages + [{"role": "user", "content": prompt}]


def chat_prompt_ids(model: ModelDir, messages: list[dict[str, str]]) -> list[int]:
    if model.template is None:
        raise GenerateError("the model has no chat template (its tokenizer_config.json or "
                            "chat_template.jinja had none when it was converted); "
                            "drop --chat", path=model.path)
    text = model.template.render(messages, add_generation_prompt=True)
    return list(model.tokenizer.encode(text, add_special_tokens=False).ids)


def _context_for(model: ModelDir, prompt: int, gen: int) -> int:
    """Enough positions for the prompt and gen tokens (at least DEFAULT_CONTEXT),
    within the model's max_context; a longer generation stops when it is full."""
    max_context = read_max_context(model)
    if prompt > max_context:
        raise GenerateError(f"the prompt is {prompt} tokens but the model's max_context is "
                            f"{max_context}", path=model.image)
    return min(max(DEFAULT_CONTEXT, prompt + gen), max_context)


# ---- statistics, in colibri-run's --stats format -------------------------------------

def stats_lines(session: Session, result: Generation) -> list[str]:
    """`colibri-generate: key: k=v ...` lines (docs/linux.md: what --stats prints)."""
    e, steps = session.engine, result.token_ns
    hp = e.hparams
    lines = [f"model: vocab={hp['vocab_size']} layers={hp['n_layers']} experts={hp['n_experts']} "
             f"top_k={hp['top_k']} max_context={hp['max_context']} fingerprint=0x{e.fingerprint:08x}",
             f"kernels: {e.kernels} threads={e.threads} batch={e.batch}",
             f"memory: context={e.context} state_bytes={e.state_bytes} "
             f"scratch_bytes={e.scratch_bytes}",
             f"sampling: seed={result.seed} " + " ".join(
                 f"{k}={v}" for k, v in vars(session.sampler.opts).items() if k != "seed"),
             f"prompt: tokens={len(result.prompt_ids)} ns={result.prompt_ns} tokens_per_s="
             f"{len(result.prompt_ids) * 1e9 / max(result.prompt_ns, 1):.2f}"]
    if steps:
        lines.append("token_ns: " + ",".join(map(str, steps)))
        ordered = sorted(steps)
        lines.append(f"decode: steps={len(steps)} ns={sum(steps)} per_token_ns_mean="
                     f"{sum(steps) // len(steps)} min={ordered[0]} median={ordered[len(steps) // 2]} "
                     f"max={ordered[-1]} tokens_per_s={len(steps) * 1e9 / sum(steps):.2f}")
    else:
        lines.append("decode: steps=0")
    lines.append(f"generate: tokens={len(result.ids)} stop={result.stop}")
    if e.routes is not None:  # as colibri-run's: attention experts (JetMoE) first
        zero = e.routes.zero if hp["zero_experts"] else None
        for topic, counts, zeros in (("attention-experts", e.routes.attention, None),
                                     ("experts", e.routes.counts, zero)):
            lines += [f"{topic}: layer={layer} top_k={hp['top_k']} routed={row.sum()} "
                      f"counts={','.join(map(str, row.tolist()))}"
                      + ("" if zeros is None else f" zero={zeros[layer]}")
                      for layer, row in enumerate(counts)
                      if row.sum() or (zeros is not None and zeros[layer])]
    return [f"{PROG}: {line}" for line in lines]


# ---- the command line ----------------------------------------------------------------

def _number(kind, low, low_ok=True):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {kind.__name__}: {text!r}") from None
        if value < low or (value == low and not low_ok):
            raise argparse.ArgumentTypeError(f"must be {'>=' if low_ok else '>'} {low}: {text!r}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Generate text with a Colibri model image (the C engine in this "
        "process): stop at EOS, stream the text, sample reproducibly, chat.")
    p.add_argument("model_dir", metavar="MODEL_DIR",
                   help=f"a colibri-convert output: {MODEL_FILE}, {TOKENIZER_FILE}, ...")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--prompt", help="the text to continue (with --chat: the user's message)")
    what.add_argument("-i", "--interactive", action="store_true",
                      help="read a line at a time from stdin and answer each (/reset, /quit)")
    p.add_argument("--gen", type=_number(int, 0), default=DEFAULT_GEN, metavar="N",
                   help=f"most tokens to generate per answer (default {DEFAULT_GEN})")
    p.add_argument("--chat", action="store_true",
                   help="wrap the prompt in the model's chat template, as a user message")
    p.add_argument("--system", help="with --chat: a system message first")
    s = p.add_argument_group("sampling (default: the model's generation_config.json, else greedy)")
    s.add_argument("--temperature", type=_number(float, 0.0), metavar="T",
                   help="0 = greedy (argmax)")
    s.add_argument("--top-k", type=_number(int, 0), metavar="K", help="0 = off")
    s.add_argument("--top-p", type=_number(float, 0.0, low_ok=False), metavar="P", help="1 = off")
    s.add_argument("--repetition-penalty", type=_number(float, 0.0, low_ok=False), metavar="R",
                   help="1 = off")
    s.add_argument("--seed", type=_number(int, 0), metavar="S",
                   help="the sampler's seed (default: a random one, shown by --stats)")
    p.add_argument("--ignore-eos", action="store_true", help="do not stop at an EOS token")
    p.add_argument("--no-special-tokens", action="store_true",
                   help="encode the prompt without the tokenizer's special tokens (BOS...)")
    p.add_argument("--context", type=_number(int, 1), metavar="N",
                   help="positions of KV state (default: enough for the prompt and --gen, at "
                        f"least {DEFAULT_CONTEXT} where the model allows)")
    p.add_argument("--threads", type=_number(int, 1), metavar="N", help="engine threads")
    p.add_argument("--mlock", action="store_true", help="lock the image in RAM")
    p.add_argument("--memory-budget", type=_size, metavar="SIZE",
                   help="run in SIZE bytes (K, M, G, KiB, MiB, GiB): routed experts read from "
                        "the file into a cache (colibri-run --memory-budget); the same tokens")
    p.add_argument("--expert-slots", type=_number(int, 1), metavar="N",
                   help="that cache with N expert slots instead of a budget")
    p.add_argument("--stats", action="store_true",
                   help="timings and expert use per layer on stderr (colibri-run's format)")
    p.add_argument("--show-ids", action="store_true",
                   help="print the prompt and generated token ids on stderr")
    add_version_option(p)
    return p


def _size(text: str) -> int:
    """colibri-run's --memory-budget sizes: digits, then K, M or G (x 1024),
    optionally followed by iB or B."""
    m = re.fullmatch(r"([0-9]+)(?:([KkMmGg])(?:iB|B)?)?", text)
    if not m or int(m[1]) == 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (e.g. 536870912, 512M, 2GiB)")
    return int(m[1]) << {None: 0, "k": 10, "m": 20, "g": 30}[m[2] and m[2].lower()]


def _session(args: argparse.Namespace, model: ModelDir, context: int, stats: bool) -> Session:
    return Session(args.model_dir, sampling=_sampling(args, model.defaults), context=context,
                   threads=args.threads, mlock=args.mlock, stats=stats,
                   memory_budget=args.memory_budget, expert_slots=args.expert_slots)


def _sampling(args: argparse.Namespace, defaults: SamplingOptions) -> SamplingOptions:
    chosen = {k: getattr(args, k) for k in ("temperature", "top_k", "top_p", "repetition_penalty",
                                           "seed") if getattr(args, k) is not None}
    return SamplingOptions(**{**vars(defaults), **chosen}).check()


def _write(out: TextIO) -> Callable[[str], None]:
    def emit(text: str) -> None:
        out.write(text)
        out.flush()
    return emit


def _one_shot(args: argparse.Namespace, model: ModelDir, out: TextIO, err: TextIO) -> int:
    if args.chat:
        prompt_ids = chat_prompt_ids(model, conversation(args.prompt, args.system))
    else:
        prompt_ids = list(model.tokenizer.encode(
            args.prompt, add_special_tokens=not args.no_special_tokens).ids)
    if not prompt_ids:
        raise GenerateError("the prompt encodes to no tokens; give a longer prompt")
    context = args.context or _context_for(model, len(prompt_ids), args.gen)
    with _session(args, model, context, args.stats) as session:
        result = session.generate(prompt_ids, args.gen, stop_at_eos=not args.ignore_eos,
                                  on_text=_write(out))
        out.write("\n")
        out.flush()
        if result.stop == "context":
            err.write(f"{PROG}: stopped after {len(result.ids)} tokens: the context of "
                      f"{context} positions is full (--context, up to the model's max_context)\n")
        if args.stats:
            err.write("\n".join(stats_lines(session, result)) + "\n")
    if args.show_ids:
        err.write(f"prompt ids: {' '.join(map(str, result.prompt_ids))}\n"
                  f"generated ids: {' '.join(map(str, result.ids))}\n")
    return 0


def _interactive(args: argparse.Namespace, model: ModelDir, inp: TextIO, out: TextIO,
                 err: TextIO) -> int:
    """One answer per input line: a conversation through the chat template when
    the model has one (or --chat), else the text continued line by line."""
    chatting = model.template is not None or args.chat
    if args.chat and model.template is None:
        chat_prompt_ids(model, [])  # raises the "no chat template" error
    tty = inp.isatty()
    context = args.context or min(read_max_context(model), DEFAULT_CONTEXT)
    with _session(args, model, context, False) as session:
        history = conversation("", args.system)[:-1] if chatting else []
        text_ids: list[int] = []
        err.write(f"{PROG}: {'chat' if chatting else 'text'} mode, context {context}; "
                  "/reset forgets, /quit or end of input stops\n")
        while True:
            if tty:
                err.write("> ")
                err.flush()
            line = inp.readline()
            if not line or line.strip() == "/quit":
                return 0
            line = line.rstrip("\n")
            if line.strip() == "/reset":
                history, text_ids = history[:1] if args.system else [], []
                session.engine.reset()
                session.fed = []
                continue
            if chatting:
                history.append({"role": "user", "content": line})
                ids = _fitting_chat(session, history, args.gen, err)
            else:
                first = not text_ids
                text_ids += session.encode(line if first else "\n" + line,
                                           add_special_tokens=first and not args.no_special_tokens)
                ids = text_ids[-(context - args.gen):] if len(text_ids) + args.gen > context \
                    else text_ids
            result = session.generate(ids, args.gen, stop_at_eos=not args.ignore_eos,
                                      on_text=_write(out))
            out.write("\n")
            out.flush()
            if chatting:
                history.append({"role": "assistant", "content": model.tokenizer.decode(
                    result.ids, skip_special_tokens=True).strip()})
            else:
                text_ids = ids + result.ids


def read_max_context(model: ModelDir) -> int:
    """The image's max_context (its header and tables, validated; data not read)."""
    from ..image.image_reader import read_image

    return read_image(model.image).record.max_context


def _fitting_chat(session: Session, history: list[dict[str, str]], gen: int,
                  err: TextIO) -> list[int]:
    """The conversation's ids, dropping the oldest turns (not a system message)
    until they and `gen` more tokens fit the context."""
    while True:
        ids = chat_prompt_ids(session.model, history)
        if len(ids) + gen <= session.engine.context:
            return ids
        first = 1 if history and history[0]["role"] == "system" else 0
        if len(history) - first <= 1:
            raise GenerateError(f"the message needs {len(ids)} positions and --gen {gen} more, "
                                f"but the context holds {session.engine.context}")
        del history[first:first + 2]
        err.write(f"{PROG}: the oldest turn was dropped to fit the context\n")


def main(argv: Sequence[str] | None = None, *, stdin: TextIO | None = None,
         stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Console entry point; returns the exit status (0 ok, 1 error, 2 usage)."""
    inp, out, err = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        _sampling(args, SamplingOptions())  # the values given, checked before anything runs
        model = ModelDir.open(args.model_dir)
        if args.interactive:
            return _interactive(args, model, inp, out, err)
        return _one_shot(args, model, out, err)
    except OptionError as exc:
        err.write(f"{PROG}: error: {exc}\n")
        return 2
    except ColibriError as exc:
        err.write(f"{PROG}: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        err.write("\n")
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
