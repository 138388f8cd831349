"""colibri-generate: text in, text out, through the colibri-run binary.

    colibri-generate MODEL_DIR --prompt TEXT [--gen N] [--run PATH]

MODEL_DIR is a converter output directory: it holds ``model.bin`` (the image)
and ``model_tokenizer.json`` (a Hugging Face ``tokenizers`` file). The prompt
is encoded with the tokenizer, ``colibri-run MODEL_DIR/model.bin --ids ...
--gen N`` greedy-decodes N tokens, and their decoded text is printed on stdout.

Library first: :func:`generate` does the work and returns a
:class:`Generation`; :func:`main` is the console script. Every failure is a
:class:`GenerateError` (a :class:`~colibri_tools.errors.ColibriError`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colibri_tools.errors import ColibriError
from colibri_tools.version import add_version_option

MODEL_FILE = "model.bin"
TOKENIZER_FILE = "model_tokenizer.json"
RUN_ENV = "COLIBRI_RUN"
RUN_NAME = "colibri-run"
DEFAULT_GEN = 32
DEFAULT_TIMEOUT = 600.0
DEFAULT_CONTEXT = 2048  # colibri-run's default context (docs/linux.md)

# colibri-run exit statuses (ports/linux/colibri_run.c)
_RUN_STATUS = {1: "model or runtime error", 2: "usage error"}


class GenerateError(ColibriError):
    """colibri-generate could not turn the prompt into text (a missing model,
    tokenizer or binary, or colibri-run failed)."""


@dataclass(frozen=True)
class Generation:
    """What :func:`generate` produced."""

    prompt_ids: list[int]  # the encoded prompt, as passed to --ids
    ids: list[int]         # the generated token ids, in order
    text: str              # ids decoded (special tokens skipped)
    stderr: str            # colibri-run's stderr (its --stats lines, if asked)


def repo_runner() -> Path:
    """Where `make host` puts colibri-run in the repository holding this file."""
    return Path(__file__).resolve().parents[2] / "build" / "host" / RUN_NAME


def _check_executable(path: Path, source: str) -> Path:
    if not path.exists():
        raise GenerateError(f"{source}: no such file", path=path)
    if path.is_dir():
        raise GenerateError(f"{source}: is a directory, not the {RUN_NAME} binary", path=path)
    if not os.access(path, os.X_OK):
        raise GenerateError(f"{source}: the file is not executable", path=path)
    return path


def find_runner(explicit: str | os.PathLike[str] | None = None,
                environ: Mapping[str, str] | None = None) -> Path:
    """Locate colibri-run: `explicit`, else $COLIBRI_RUN, else the repository's
    build/host/colibri-run, else colibri-run on PATH."""
    env = os.environ if environ is None else environ
    if explicit is not None:
        return _check_executable(Path(explicit), "--run")
    if env.get(RUN_ENV):
        return _check_executable(Path(env[RUN_ENV]), f"${RUN_ENV}")
    built = repo_runner()
    if built.is_file() and os.access(built, os.X_OK):
        return built
    on_path = shutil.which(RUN_NAME, path=env.get("PATH"))
    if on_path is not None:
        return Path(on_path)
    raise GenerateError(
        f"cannot find the {RUN_NAME} binary: build it with `make host` in the Colibri "
        f"repository (it goes to {built}), or pass --run PATH, or set ${RUN_ENV}")


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
        raise GenerateError(
            f"no model image {MODEL_FILE} in the model directory (convert a checkpoint "
            "with colibri-convert first)", path=image)
    if not tokenizer.is_file():
        raise GenerateError(
            f"no tokenizer {TOKENIZER_FILE} in the model directory (colibri-convert "
            "writes it when the checkpoint has a tokenizer.json)", path=tokenizer)
    return image, tokenizer


def load_tokenizer(path: str | os.PathLike[str]) -> Any:
    """A `tokenizers.Tokenizer` read from a tokenizer.json file."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise GenerateError("the `tokenizers` package is not installed "
                            "(pip install tokenizers)") from exc
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises plain Exception subclasses
        raise GenerateError(f"cannot read the tokenizer: {exc}", path=path) from exc


def parse_ids_line(stdout: str, expected: int) -> list[int]:
    """The generated ids from colibri-run's stdout (one line of ids)."""
    lines = stdout.splitlines()
    if len(lines) != 1:
        raise GenerateError(f"{RUN_NAME} printed {len(lines)} lines on stdout, expected 1: "
                            f"{stdout[:200]!r}")
    try:
        ids = [int(tok) for tok in lines[0].split()]
    except ValueError as exc:
        raise GenerateError(f"{RUN_NAME} printed something other than token ids: "
                            f"{lines[0][:200]!r}") from exc
    if len(ids) != expected:
        raise GenerateError(f"{RUN_NAME} printed {len(ids)} ids, expected {expected}")
    return ids


def run_ids(runner: Path, image: Path, ids: Sequence[int], gen: int, *,
            timeout: float = DEFAULT_TIMEOUT,
            extra_args: Sequence[str] = ()) -> tuple[list[int], str]:
    """Run colibri-run on `ids`, greedy-decode `gen` tokens: (ids, stderr)."""
    if not ids:
        raise GenerateError("the prompt encodes to no tokens; give a longer prompt")
    cmd = [str(runner), str(image), "--ids", ",".join(str(int(i)) for i in ids),
           "--gen", str(gen), *extra_args]
    needed = len(ids) + max(gen - 1, 0)
    if needed > DEFAULT_CONTEXT and "--context" not in extra_args:
        cmd += ["--context", str(needed)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise GenerateError(f"{RUN_NAME} did not finish within {timeout:g} s "
                            "(raise --timeout, or ask for fewer tokens)", path=image) from exc
    except OSError as exc:
        raise GenerateError(f"cannot start {runner}: {exc.strerror or exc}", path=image) from exc
    if proc.returncode != 0:
        what = _RUN_STATUS.get(proc.returncode, f"exit status {proc.returncode}")
        if proc.returncode < 0:
            what = f"killed by signal {-proc.returncode}"
        detail = proc.stderr.strip() or "(no message)"
        raise GenerateError(f"{RUN_NAME} failed ({what}):\n{detail}", path=image)
    return parse_ids_line(proc.stdout, gen), proc.stderr


def generate(model_dir: str | os.PathLike[str], prompt: str, gen: int = DEFAULT_GEN, *,
             runner: str | os.PathLike[str] | None = None, timeout: float = DEFAULT_TIMEOUT,
             add_special_tokens: bool = True, extra_args: Sequence[str] = ()) -> Generation:
    """Greedy-decode `gen` tokens after `prompt` with the model in `model_dir`."""
    if gen < 0:
        raise GenerateError(f"gen must be >= 0, got {gen}")
    image, tok_path = model_files(model_dir)
    run_path = find_runner(runner)
    tokenizer = load_tokenizer(tok_path)
    prompt_ids = list(tokenizer.encode(prompt, add_special_tokens=add_special_tokens).ids)
    ids, stderr = run_ids(run_path, image, prompt_ids, gen, timeout=timeout,
                          extra_args=extra_args)
    text = tokenizer.decode(ids, skip_special_tokens=True) if ids else ""
    return Generation(prompt_ids=prompt_ids, ids=ids, text=text, stderr=stderr)


def _non_negative(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="colibri-generate",
        description="Generate text with a Colibri model image (greedy decoding, "
                    "through the colibri-run binary).")
    p.add_argument("model_dir", metavar="MODEL_DIR",
                   help=f"directory holding {MODEL_FILE} and {TOKENIZER_FILE}")
    p.add_argument("--prompt", required=True, help="the text to continue")
    p.add_argument("--gen", type=_non_negative, default=DEFAULT_GEN, metavar="N",
                   help=f"tokens to generate (default {DEFAULT_GEN})")
    p.add_argument("--run", metavar="PATH",
                   help=f"the {RUN_NAME} binary (default: ${RUN_ENV}, else the "
                        f"repository's build/host/{RUN_NAME}, else {RUN_NAME} on PATH)")
    p.add_argument("--timeout", type=_positive_seconds, default=DEFAULT_TIMEOUT,
                   metavar="SECONDS", help=f"give up after this long (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("--no-special-tokens", action="store_true",
                   help="encode the prompt without the tokenizer's special tokens (BOS...)")
    p.add_argument("--mlock", action="store_true", help=f"pass --mlock to {RUN_NAME}")
    p.add_argument("--stats", action="store_true",
                   help=f"pass --stats to {RUN_NAME} and show its statistics on stderr")
    p.add_argument("--show-ids", action="store_true",
                   help="print the prompt and generated token ids on stderr")
    add_version_option(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns the exit status (0 ok, 1 error, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    extra = [flag for flag, on in (("--mlock", args.mlock), ("--stats", args.stats)) if on]
    try:
        result = generate(args.model_dir, args.prompt, args.gen, runner=args.run,
                          timeout=args.timeout, add_special_tokens=not args.no_special_tokens,
                          extra_args=extra)
    except ColibriError as exc:
        print(f"colibri-generate: error: {exc}", file=sys.stderr)
        return 1
    if args.stats and result.stderr:
        sys.stderr.write(result.stderr)
    if args.show_ids:
        print(f"prompt ids: {' '.join(map(str, result.prompt_ids))}", file=sys.stderr)
        print(f"generated ids: {' '.join(map(str, result.ids))}", file=sys.stderr)
    print(result.text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
