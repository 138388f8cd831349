"""colibri-bench --emulate BOARD: instructions per token on an emulated Linux
board (rpi4: Cortex-A72, NEON without the dot product; jetson_orin_nano:
dot product), Colibri beside llama.cpp on the same model.

    colibri-bench --emulate rpi4 [--quant int8|int4] [--prompt 32] [--gen 16]
                  [--llama-bench PATH]

Both engines are built for the board with its own compiler flags (the board
file's cflags: `make linux-cross`, and llama.cpp's source from the
build-llama-bench tree cross-compiled with the same -mcpu) and run under
qemu-user with the board's CPU model and a TCG plugin that counts the guest
instructions each run executes (bench/qemu_insn.c). QEMU counts
instructions, not cycles: the figures compare work, not time on a board.

Per token is a difference of two runs, so that loading, set-up and exit
cancel out: decode = (run with 1 + GEN decoded tokens - run with 1) / GEN
(Colibri: colibri-run --ids 1 token --gen N --random-tokens, llama.cpp:
llama-bench tg N, both from position 0 and one thread); prompt = (prompt of
PROMPT tokens - prompt of PROMPT/2) / (PROMPT/2), each in one batch. Colibri
runs every kernel table of the board and the reference, in both quantized
layouts (rows, and groups of 16 rows: --row-groups).
"""
from __future__ import annotations

import argparse
import pathlib
import subprocess
import tempfile

from ..errors import ColibriError

REPO = pathlib.Path(__file__).resolve().parents[3]
PLUGIN = REPO / "build" / "host" / "qemu-insn.so"
RUN_TIMEOUT = 3600


class EmulateError(ColibriError):
    """A build or an emulated run of colibri-bench --emulate failed."""


def _run(cmd: list[str], what: str, timeout: float, cwd: pathlib.Path | None = None) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EmulateError(f"{what}: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise EmulateError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return done.stdout


def build_colibri(board) -> pathlib.Path:
    """The board's colibri-run (make linux-cross) and the counting plugin."""
    if board.port != "linux" or board.emulate.get("qemu") != "qemu-aarch64":
        raise EmulateError(f"--emulate takes a Linux board run under qemu-aarch64 (rpi4, "
                           f"jetson_orin_nano), not {board.name}")
    _run(["make", "-s", "linux-cross", f"BOARD={board.name}", str(PLUGIN.relative_to(REPO))],
         f"make linux-cross BOARD={board.name}", 1800, cwd=REPO)
    return REPO / "build" / "linux-cross" / board.name / "colibri-run"


def build_llama(llama_bench: pathlib.Path, board) -> pathlib.Path:
    """llama.cpp's llama-bench for the board, from the source tree beside the
    host build that build-llama-bench made (DIR/src), with the board's
    -mcpu, statically linked; built once into DIR/build-BOARD (~6 minutes)."""
    peer = llama_bench.resolve().parent.parent.parent
    src, out = peer / "src", peer / f"build-{board.name}"
    exe = out / "bin" / "llama-bench"
    if exe.is_file():
        return exe
    if not (src / "CMakeLists.txt").is_file():
        raise EmulateError(f"{src}: no llama.cpp source tree (the one build-llama-bench keeps "
                           "beside its build)")
    cross = board.cross_prefix
    flags = " ".join(board.cflags)
    _run(["cmake", "-S", str(src), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release",
          "-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=aarch64",
          f"-DCMAKE_C_COMPILER={cross}gcc", f"-DCMAKE_CXX_COMPILER={cross}g++",
          f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}", "-DGGML_NATIVE=OFF",
          "-DGGML_OPENMP=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DCMAKE_EXE_LINKER_FLAGS=-static",
          "-DGGML_BLAS=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF"],
         "cmake (llama.cpp for the board)", 600)
    _run(["cmake", "--build", str(out), "--target", "llama-bench", "-j2"],
         "building llama.cpp's llama-bench for the board", 3600)
    return exe


def count(cmd: list[str], board) -> int:
    """Guest instructions one run of cmd executes under the board's qemu-user."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "count"
        qemu = [board.emulate["qemu"], "-cpu", board.emulate.get("cpu", "max"),
                "-plugin", f"{PLUGIN},out={out}"]
        _run(qemu + cmd, " ".join(cmd[:1] + cmd[-6:]), RUN_TIMEOUT)
        try:
            return int(out.read_text())
        except (OSError, ValueError) as exc:
            raise EmulateError(f"the counting plugin left no count ({exc})") from exc


def per_token(board, runs) -> dict:
    """{"decode": ..., "prompt": ...} instructions per token from runs(kind, n)
    -> the command of a run with n decoded tokens / prompt tokens."""
    d1, d2 = runs("decode", 1), runs("decode", 1 + runs.gen)
    half = runs.prompt // 2
    p1, p2 = runs("prompt", half), runs("prompt", runs.prompt)
    return {"decode": (count(d2, board) - count(d1, board)) / runs.gen,
            "prompt": (count(p2, board) - count(p1, board)) / (runs.prompt - half)}


class ColibriRuns:
    """colibri-run commands: one prompt token then n decoded (random ids, as
    llama-bench's tg feeds), or n prompt tokens in one batch."""

    def __init__(self, exe: pathlib.Path, image: pathlib.Path, table: str, prompt: int, gen: int):
        self.exe, self.image, self.table, self.prompt, self.gen = exe, image, table, prompt, gen

    def __call__(self, kind: str, n: int) -> list[str]:
        common = [str(self.exe), str(self.image), "--threads", "1", "--kernels", self.table]
        if kind == "decode":
            return common + ["--ids", "3", "--gen", str(n), "--random-tokens", "1"]
        ids = ",".join(str((7 * i + 3) % 1000) for i in range(n))
        return common + ["--ids", ids, "--gen", "0", "--batch", str(min(n, 256))]


class LlamaRuns:
    """llama-bench commands: tg n or pp n, one thread, one repetition, no warm-up."""

    def __init__(self, exe: pathlib.Path, gguf: pathlib.Path, prompt: int, gen: int):
        self.exe, self.gguf, self.prompt, self.gen = exe, gguf, prompt, gen

    def __call__(self, kind: str, n: int) -> list[str]:
        p, g = (0, n) if kind == "decode" else (n, 0)
        return [str(self.exe), "-m", str(self.gguf), "-p", str(p), "-n", str(g), "-t", "1",
                "-r", "1", "--no-warmup", "-o", "jsonl"]


def _images(args: argparse.Namespace, work: pathlib.Path) -> tuple[object, dict]:
    """The benchmark's random model and its images: {"rows": path} and, with
    --quant, {"r16": path} (the same weights in groups of 16 rows)."""
    from ..converter.convert import convert
    from .bench_model import build_model

    args.row_groups = False
    model, image = build_model(args, work)
    images = {"rows": image}
    if args.quant:
        convert(work / "hf", work / "r16", progress=False, quant=args.quant,
                quant_attention=True, quant_embeddings=True, row_groups=True)
        images["r16"] = work / "r16" / "model.bin"
    return model, images


def run_emulate(args: argparse.Namespace) -> dict:
    from ..board.boards import load
    from .bench_model import bytes_per_token, llama_model, llama_type, shape_of

    board = load(args.emulate)
    colibri_run = build_colibri(board)
    llama = build_llama(pathlib.Path(args.llama_bench), board) if args.llama_bench else None
    rows = []
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        model, images = _images(args, pathlib.Path(tmp))
        params, weight_bytes, _ = bytes_per_token(images["rows"])
        for table in (*board.kernels, "reference"):
            for layout, image in images.items():
                runs = ColibriRuns(colibri_run, image, table, args.prompt, args.gen)
                rows.append({"engine": "colibri", "table": table, "layout": layout,
                             **per_token(board, runs)})
        if llama is not None:
            gguf, _ = llama_model(args, model, pathlib.Path(tmp))
            rows.append({"engine": "llama.cpp", "table": "ggml-cpu", "layout": llama_type(args),
                         **per_token(board, LlamaRuns(llama, gguf, args.prompt, args.gen))})
    return {"board": board.name, "cpu": board.emulate.get("cpu", "max"),
            "cflags": " ".join(board.cflags), "model": shape_of(args), "parameters": params,
            "weights": args.quant or "f32", "bytes_per_decoded_token": weight_bytes,
            "prompt_tokens": args.prompt, "decoded_tokens": args.gen, "rows": rows}


def print_emulate(report: dict) -> None:
    shape = " ".join(f"{k}={v}" for k, v in report["model"].items())
    print(f"board {report['board']}: qemu-aarch64 -cpu {report['cpu']}, built with "
          f"{report['cflags']}; instructions counted by QEMU (work, not time)")
    print(f"model: {shape}, {report['parameters'] / 1e6:.1f} M parameters, weights "
          f"{report['weights']}, {report['bytes_per_decoded_token'] / 1e6:.1f} MB read per "
          f"decoded token")
    print(f"per token: decode over {report['decoded_tokens']} tokens, prompt over the last "
          f"{report['prompt_tokens'] - report['prompt_tokens'] // 2} of {report['prompt_tokens']}")
    peer = next((r for r in report["rows"] if r["engine"] == "llama.cpp"), None)
    print(f"{'engine':10}{'table':>11}{'layout':>8}{'decode M/token':>16}{'prompt M/token':>16}"
          f"{'per weight byte':>17}{'vs llama.cpp':>16}")
    for row in report["rows"]:
        ratio = ""
        if peer is not None:
            ratio = f"{row['decode'] / peer['decode']:.2f}x / {row['prompt'] / peer['prompt']:.2f}x"
        print(f"{row['engine']:10}{row['table']:>11}{row['layout']:>8}{row['decode'] / 1e6:16.2f}"
              f"{row['prompt'] / 1e6:16.2f}{row['decode'] / report['bytes_per_decoded_token']:17.3f}"
              f"{ratio:>16}")
