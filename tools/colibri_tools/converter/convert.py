"""colibri-convert: a Hugging Face MoE checkpoint -> model.bin, model_config.h,
model_tokenizer.json.

Library first: `convert(hf_dir, out_dir)` does the work and returns a
ConvertResult; `main(argv)` is the thin command line around it.

Outputs are written under temporary names in OUT_DIR and renamed only once the
image has been re-read and checked (meta CRC, every data CRC, every tensor's
bytes against the checkpoint). On any error the temporary files are removed and
an older output in OUT_DIR is left as it was.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..errors import ColibriError, ImageFormatError, OptionError
from ..image.image_layout import align_up, place_tensors
from ..image.image_reader import ModelImage, read_image
from ..image.image_spec import (
    DATA_ALIGN,
    DEFAULT_ALIGNMENT,
    MAX_ALIGNMENT,
    MIN_ALIGNMENT,
    QK_DTYPES,
    SUPERBLOCK_DTYPES,
    FfnKind,
    ModelRecord,
    tables_end,
)
from ..image.image_writer import SourceTensor, WrittenImage, write_image
from ..image.quant import (
    QK_NAMES,
    QUANT_NAMES,
    assign_dtypes,
    in_row_groups,
    mixed_dtypes,
    most_used_experts,
    shared_roles,
    tensor_size,
)
from ..image.sizes import MAX_BATCH, scratch_size, state_size
from ..image.status import Status
from ..runtime.chat import COMPANION_FILES
from ..version import add_version_option
from .checkpoint import Checkpoint
from .config_header import write_config_header
from .families import ModelSpec, as_switch, model_spec, switch_candidate
from .multimodal import TEXT_MODELS, RenamedView, text_model_name
from .quant_widths import parse_size
from .tensor_map import TensorMap
from .tensor_map_kda import SAVED_NAMES

log = logging.getLogger("colibri_tools.converter.convert")

IMAGE_NAME = "model.bin"
HEADER_NAME = "model_config.h"
TOKENIZER_OUT_NAME = "model_tokenizer.json"
DEFAULT_CONTEXT_CAP = 2048


@dataclass(frozen=True)
class ConvertResult:
    image_path: Path
    header_path: Path
    tokenizer_path: Path | None
    family: str
    arch: int
    record: ModelRecord
    ffn_kinds: list[int]
    fingerprint: int
    image_size: int
    n_tensors: int
    alignment: int
    context: int
    batch: int
    state_bytes: int
    scratch_bytes: int
    dropped_shared_expert: bool
    quant: str | None = None
    quant_attention: bool = False
    quant_embeddings: bool = False
    row_groups: bool = False
    experts_last: bool = False
    conv_layers: int = 0  # short convolution layers (format 1.13): no KV cache


def _check_alignment(alignment: int) -> None:
    if not (MIN_ALIGNMENT <= alignment <= MAX_ALIGNMENT and alignment & (alignment - 1) == 0):
        raise OptionError(f"--alignment {alignment}: must be a power of two, "
                          f"{MIN_ALIGNMENT} .. {MAX_ALIGNMENT}")


def _choose_context(record: ModelRecord, context: int | None) -> int:
    if context is None:
        return min(record.max_context, DEFAULT_CONTEXT_CAP)
    if not 1 <= context <= record.max_context:
        raise OptionError(f"--context {context}: must be 1 .. {record.max_context} "
                          f"(max_position_embeddings)")
    return context


def _plan(ckpt: Checkpoint, quant: str | None = None, quant_attention: bool = False,
          quant_embeddings: bool = False) -> tuple[ModelSpec, list[SourceTensor], bool]:
    """The model spec and its tensors (with the dtypes --quant asks for),
    switch detection included; nothing written yet."""
    spec = model_spec(ckpt.config, ckpt.config_path)
    if ckpt.config.get("model_type") in TEXT_MODELS:
        log.info("%s: its text model converted, the vision tower left out",
                 ckpt.config["model_type"])
        ckpt = RenamedView(ckpt, text_model_name)
    if spec.family in SAVED_NAMES:
        ckpt = RenamedView(ckpt, SAVED_NAMES[spec.family])
    tmap = TensorMap(ckpt, spec)
    dropped = switch_candidate(spec) and tmap.shared_expert_is_zero()
    if dropped:
        spec = as_switch(spec)
        tmap.spec = spec
        log.info("shared expert is all zeros in every MoE layer: dropped; written as arch 5 "
                 "(switch, top-1)")
    sources = tmap.sources()
    tmap.check_all_used()
    entries = assign_dtypes([s.entry for s in sources], quant, quant_attention, quant_embeddings)
    sources = [replace(s, entry=e) for s, e in zip(sources, entries)]
    return spec, sources, dropped


def _self_check(path: Path, written: WrittenImage) -> ModelImage:
    """Re-read the image: header and tables validated and equal to what was
    written, and every tensor's data CRC (computed by the writer from the
    bytes it took from the checkpoint) checked against the file. The
    checkpoint is not read a second time: the CRCs already prove the bytes."""
    image = read_image(path, verify_data=True)
    if image.fingerprint != written.meta_crc32 or image.tensors != written.tensors:
        raise ImageFormatError("re-read tables differ from what was written",
                               status=Status.E_CHECKSUM.c_name, path=path)
    return image


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def _staged_outputs(out_dir: Path, names: Sequence[str]) -> Iterator[dict[str, Path]]:
    """Temporary paths in out_dir for each final name; renamed into place on success,
    removed on failure (and out_dir too, if this call created it and it is empty)."""
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    staged: dict[str, Path] = {}
    try:
        for name in names:
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out_dir)
            os.fchmod(fd, 0o666 & ~_umask())  # what open() would give, not mkstemp's 0600
            os.close(fd)
            staged[name] = Path(tmp)
        yield staged
        for name, tmp in staged.items():
            os.replace(tmp, out_dir / name)
    except BaseException:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
        if created and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise


def _write_all(staged: dict[str, Path], spec: ModelSpec, sources: list[SourceTensor],
               alignment: int, sizing: tuple[int, int], ckpt: Checkpoint,
               progress: bool, experts_last: bool) -> ModelImage:
    total = sum(tensor_size(s.entry) for s in sources)
    with tqdm(total=total, unit="B", unit_scale=True, desc=IMAGE_NAME,
              disable=None if progress else True) as bar:
        written = write_image(staged[IMAGE_NAME], arch=spec.arch, record=spec.record,
                              ffn_kinds=spec.ffn_kinds, sources=sources, alignment=alignment,
                              progress=bar.update, attn_kinds=spec.attn_kinds,
                              experts_last=experts_last)
    image = _self_check(staged[IMAGE_NAME], written)
    context, batch = sizing
    write_config_header(staged[HEADER_NAME], image, context, ckpt.path.resolve().name, batch)
    if TOKENIZER_OUT_NAME in staged:
        shutil.copyfile(ckpt.tokenizer_path, staged[TOKENIZER_OUT_NAME])
    for source, name in COMPANION_FILES.items():
        if name in staged:
            shutil.copyfile(ckpt.path / source, staged[name])
    return image


def _check_fits(board, spec: ModelSpec, source: Path, alignment: int, context: int,
                batch: int, app: str, quant: str | None) -> None:
    """Refuse, before anything is written, a model that does not fit the board
    (the planner's numbers: colibri-board fit)."""
    from ..board.boards import Board, load
    from ..board.fit import facts_from_spec, plan, refusal

    board = board if isinstance(board, Board) else load(board)
    facts = facts_from_spec(spec, str(source), alignment=alignment, context=context, batch=batch,
                            quant=quant)
    report = plan(board, facts, app=app)
    if not report.fits:
        raise OptionError(f"--board {board.name}: {refusal(report)}")


def _mixed_sources(spec: ModelSpec, sources: list[SourceTensor], ckpt: Checkpoint,
                   calibration: Path, share: float, alignment: int, attention: bool,
                   embeddings: bool) -> list[SourceTensor]:
    """--quant mixed: count expert use on the calibration text with the float32
    model, then give the most used experts Q8 and the others Q4."""
    from .quant_calibrate import calibration_ids, expert_counts

    ids = calibration_ids(calibration, ckpt.tokenizer_path)
    counts = expert_counts(spec, sources, ids, alignment)
    chosen = most_used_experts(counts, share)
    log.info("--quant mixed: %d of %d experts Q8 (the most used on %d calibration tokens), the "
             "others Q4", len(chosen), int(np.count_nonzero(counts.sum(axis=1))) *
             spec.record.n_experts, len(ids))
    entries = mixed_dtypes([s.entry for s in sources], chosen, attention, embeddings)
    return [replace(s, entry=e) for s, e in zip(sources, entries)]


def _weighted_sources(spec: ModelSpec, sources: list[SourceTensor], ckpt: Checkpoint,
                      calibration: Path, alignment: int) -> list[SourceTensor]:
    """--quant qk2 .. qk6 with --calibration: each super-block matrix's
    quantizer weighs its error by the energy of its input columns on the text
    (quant_importance.py)."""
    from .quant_calibrate import calibration_ids
    from .quant_importance import importance

    ids = calibration_ids(calibration, ckpt.tokenizer_path)
    energy = importance(spec, sources, ids, alignment)
    weighted = [replace(s, importance=energy.get((s.entry.role, s.entry.layer, s.entry.expert)))
                if s.entry.dtype in QK_DTYPES else s for s in sources]
    log.info("--calibration: %d calibration tokens weigh %d of %d super-block matrices",
             len(ids), sum(w.importance is not None for w in weighted),
             sum(s.entry.dtype in QK_DTYPES for s in sources))
    return weighted


def _chosen_widths(sources: list[SourceTensor], target_bpw: float | None, row_groups: bool,
                   target_size: int | None = None, image_bytes=None) -> list[SourceTensor]:
    """--target-bpw (or --target-size: the image at most target_size bytes as
    image_bytes(entries) counts them): each super-block matrix at the width
    quant_widths chose (the shared ones, keys, values and LM head, kept
    QK6), the bytes counted as they will be stored (with `row_groups` in
    groups of 16 rows)."""
    from .quant_widths import budget_bytes, choose_widths, choose_widths_for_size, width_cost

    def stored(entries: list) -> list:
        return in_row_groups(entries) if row_groups else entries

    shared = shared_roles([s.entry for s in sources])
    fixed = stored([s.entry for s in sources
                    if s.entry.dtype in QK_DTYPES and s.entry.role in shared])
    costs = [width_cost(s, row_groups) for s in sources
             if s.entry.dtype in QK_DTYPES and s.entry.role not in shared]
    if not costs:
        raise OptionError("--target-bpw, --target-size: no matrix of this model can be stored "
                          "as super-blocks")
    key = lambda e: (e.role, e.layer, e.expert)  # noqa: E731

    def with_widths(chosen: dict) -> list[SourceTensor]:
        return [replace(s, entry=replace(s.entry, dtype=chosen[key(s.entry)]))
                if key(s.entry) in chosen else s for s in sources]

    if target_size is not None:
        chosen = choose_widths_for_size(costs, target_size, lambda widths: image_bytes(
            stored([s.entry for s in with_widths(widths)])))
    else:
        chosen = choose_widths(costs, budget_bytes(costs, target_bpw,
                                                   sum(tensor_size(e) for e in fixed),
                                                   sum(math.prod(e.shape) for e in fixed)))
    out = with_widths(chosen)
    chosen_entries = [e for e in stored([s.entry for s in out]) if e.dtype in SUPERBLOCK_DTYPES]
    got = sum(tensor_size(e) for e in chosen_entries)
    weights = sum(math.prod(e.shape) for e in chosen_entries)
    log.info("--target-%s: %d matrices chosen, %d kept QK6, %.3f bits a weight (%d bytes)",
             f"bpw {target_bpw:.3f}" if target_size is None else f"size {target_size}",
             len(costs), len(fixed), 8 * got / weights, got)
    return out


def _image_bytes(spec: ModelSpec, alignment: int, experts_last: bool):
    """entries -> the bytes of the image write_image would make of them."""
    def size(entries: list) -> int:
        end = tables_end(len(spec.ffn_kinds), len(entries), spec.record.header_size)
        return place_tensors(entries, align_up(end, DATA_ALIGN), alignment,
                             experts_last=experts_last)[1]
    return size


def _with_int8_cache(spec: ModelSpec) -> ModelSpec:
    """--kv-int8: the record's KV_INT8 flag (format 1.15)."""
    if spec.record.mla:
        raise OptionError("--kv-int8: this model's attention is MLA, whose latent cache stays "
                          "float32")
    return replace(spec, record=replace(spec.record, kv_int8=1))


def _check_output_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise OptionError(f"-o {out_dir}: a file of that name exists; the output is a folder "
                          "(model.bin, model_config.h, model_tokenizer.json): choose another "
                          "name or remove the file")


def convert(hf_dir: str | Path, out_dir: str | Path, *, context: int | None = None,
            alignment: int = DEFAULT_ALIGNMENT, progress: bool = True,
            batch: int = 1, board=None, app: str = "serial_runner", quant: str | None = None,
            quant_attention: bool = False, quant_embeddings: bool = False,
            calibration: str | Path | None = None, int8_share: float = 0.25,
            row_groups: bool | None = None, experts_last: bool = False,
            target_bpw: float | None = None, kv_int8: bool = False,
            target_size: int | None = None) -> ConvertResult:
    """Convert the checkpoint in hf_dir; write model.bin, model_config.h (its
    scratch sized for prompt chunks of `batch` tokens) and (when the
    checkpoint has tokenizer.json) model_tokenizer.json into out_dir. With
    `board` (a name or Board), refuse first a model that does not fit it
    (weights and, for `app`'s buffers, RAM). `quant` ("int8", "int4") stores
    the feed-forward matrices Q8 or Q4, with `quant_attention` the attention
    projections too, with `quant_embeddings` the token embedding and LM head
    (docs/format.md 3.3). `quant` "mixed" stores the `int8_share` of each
    layer's experts that the `calibration` text uses most as Q8 and the others
    as Q4 (the rest of the feed-forward Q8; docs/quantization.md). `row_groups`
    (None: whenever quantized) stores those matrices (but the token embedding)
    in groups of 16 rows (Q8_R16, Q4_R16: docs/format.md 3.4; under qk2 .. qk6
    QK2_R16 .. QK6_R16, 3.6), the layout the SIMD kernels read fastest; False
    row by row.
    `experts_last` places every expert block after the other tensors' data
    (format 1.9, docs/format.md 3.2): a device holds the start of the image
    and its port reads the routed experts from storage. `target_bpw` chooses a
    super-block width (QK2 .. QK6) for each matrix --quant qk* would store, by
    measured error (weighed by the `calibration` text when given), so that
    those matrices take target_bpw bits a weight (quant_widths.py); `target_size`
    instead so that model.bin takes at most that many bytes. `kv_int8`
    sets the image's KV_INT8 flag (format 1.15): the engine holds keys and
    values as int8 per head and position, about a quarter of the state
    (docs/core.md); not for MLA models, whose latent stays float32."""
    _check_alignment(alignment)
    if target_bpw is not None and target_size is not None:
        raise OptionError("--target-bpw or --target-size: one target, not both")
    chooser = "--target-bpw" if target_bpw is not None else "--target-size" if target_size else ""
    if chooser:
        if quant is not None:
            raise OptionError(f"{chooser} chooses the widths itself: not with --quant")
        quant = "qk4"  # the candidates: what a super-block --quant would store
    if quant is not None and quant not in (*QUANT_NAMES, "mixed"):
        raise OptionError(f"--quant {quant}: one of {', '.join(QUANT_NAMES)}, mixed")
    if quant == "mixed" and calibration is None:
        raise OptionError("--quant mixed needs --calibration TEXT")
    if calibration is not None and quant not in ("mixed", *QK_NAMES):  # or --target-bpw
        raise OptionError(f"--calibration goes with --quant mixed or {', '.join(QK_NAMES)}, not "
                          f"{quant or 'float32'}")
    if (quant_attention or quant_embeddings or row_groups) and quant is None:
        raise OptionError("--quant-attention, --quant-embeddings and --row-groups need --quant "
                          "(int8, int4, mixed, qk2 .. qk6) or --target-bpw")
    if not 1 <= batch <= MAX_BATCH:
        raise OptionError(f"--batch {batch}: must be 1 .. {MAX_BATCH}")
    row_groups = quant is not None if row_groups is None else row_groups
    out_dir = Path(out_dir)
    _check_output_dir(out_dir)
    with Checkpoint(hf_dir) as ckpt:
        mixed = quant == "mixed"
        spec, sources, dropped = _plan(ckpt, None if mixed else quant, quant_attention,
                                       quant_embeddings)
        if kv_int8:
            spec = _with_int8_cache(spec)
        context = _choose_context(spec.record, context)
        if board is not None:  # mixed: sized as int8, chosen widths as qk6, upper bounds
            _check_fits(board, spec, ckpt.path, alignment, context, batch, app,
                        "int8" if mixed else "qk6" if chooser else quant)
        if mixed:
            sources = _mixed_sources(spec, sources, ckpt, Path(calibration), int8_share, alignment,
                                     quant_attention, quant_embeddings)
        elif calibration is not None:
            sources = _weighted_sources(spec, sources, ckpt, Path(calibration), alignment)
        if chooser:
            sources = _chosen_widths(sources, target_bpw, row_groups, target_size,
                                     _image_bytes(spec, alignment, experts_last))
        if row_groups:
            entries = in_row_groups([s.entry for s in sources])
            sources = [replace(s, entry=e) for s, e in zip(sources, entries)]
        names = [IMAGE_NAME, HEADER_NAME] + ([TOKENIZER_OUT_NAME] if ckpt.tokenizer_path else [])
        # generation settings and the chat template, copied as they are (colibri-generate)
        companions = [n for s, n in COMPANION_FILES.items() if (ckpt.path / s).is_file()]
        with _staged_outputs(out_dir, names + companions) as staged:
            image = _write_all(staged, spec, sources, alignment, (context, batch), ckpt, progress,
                               experts_last)
        for name in set(COMPANION_FILES.values()) - set(companions):
            (out_dir / name).unlink(missing_ok=True)  # stale from another model
        if ckpt.tokenizer_path is None:
            (out_dir / TOKENIZER_OUT_NAME).unlink(missing_ok=True)  # stale from another model
            log.warning("%s has no tokenizer.json: the image is written, but colibri-generate "
                        "and colibri-vocab need one", ckpt.path)
    return ConvertResult(
        out_dir / IMAGE_NAME, out_dir / HEADER_NAME,
        out_dir / TOKENIZER_OUT_NAME if TOKENIZER_OUT_NAME in names else None,
        spec.family, int(spec.arch), spec.record, spec.ffn_kinds, image.fingerprint,
        image.image_size, len(image.tensors), alignment, context, batch,
        state_size(spec.record, context, spec.conv_layers, spec.ffn_only_layers),
        scratch_size(spec.record, context, batch, image.quantized, image.shortcut),
        dropped, quant, quant_attention, quant_embeddings, row_groups, experts_last,
        spec.conv_layers)


def summary(result: ConvertResult) -> str:
    """A few human-readable lines about a conversion."""
    r = result.record
    n_moe = sum(1 for k in result.ffn_kinds if k in (FfnKind.MOE, FfnKind.SHORTCUT))
    lines = [
        f"{result.family} (arch {result.arch}): {r.n_layers} layers ({n_moe} MoE, "
        f"{r.n_layers - n_moe} dense"
        + (f"; {result.conv_layers} short convolutions, no KV cache" if result.conv_layers else "")
        + f"), vocab {r.vocab_size}, hidden {r.hidden_size}, "
        f"heads {r.n_heads}/{r.n_kv_heads} x {r.head_dim}, max context {r.max_context}",
        f"experts: {r.n_experts} x {r.expert_intermediate}, top-{r.top_k}, "
        f"shared {r.shared_intermediate}, dense {r.dense_intermediate}"
        + (f", {r.zero_experts} zero-computation" if r.zero_experts else "")
        + (" (zero shared expert dropped)" if result.dropped_shared_expert else ""),
        f"image: {result.image_size} bytes, {result.n_tensors} tensors, alignment "
        f"{result.alignment}, fingerprint 0x{result.fingerprint:08X}"
        + (", expert blocks last" if result.experts_last else "")
        + (f", {result.quant} feed-forward" + (", attention" if result.quant_attention else "")
           + (", embedding, LM head" if result.quant_embeddings else "") + " matrices"
           + (" in groups of 16 rows" if result.row_groups else "")
           if result.quant else ""),
        f"context {result.context}: state {result.state_bytes} bytes, "
        f"scratch {result.scratch_bytes} bytes (prompt chunks of {result.batch})",
        "wrote " + ", ".join(str(p) for p in (result.image_path, result.header_path,
                                              result.tokenizer_path) if p is not None),
    ]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="colibri-convert", description="Convert a Hugging Face "
                                "MoE checkpoint (a model_type of the README's table) to a "
                                "Colibri model image.")
    p.add_argument("hf_dir", type=Path, help="directory with config.json and the weights")
    p.add_argument("-o", "--out", dest="out_dir", type=Path, required=True,
                   help="output directory for model.bin, model_config.h, model_tokenizer.json")
    p.add_argument("--context", type=int, default=None,
                   help="state context for model_config.h (default min(max positions, 2048))")
    p.add_argument("--batch", type=int, default=1,
                   help="prompt tokens per forward chunk the scratch in model_config.h is sized "
                        "for, 1 .. 256 (default 1)")
    p.add_argument("--alignment", type=int, default=DEFAULT_ALIGNMENT,
                   help="alignment of every expert block, a power of two 64 .. 1048576")
    p.add_argument("--board", help="refuse, before writing, a model that does not fit this "
                   "board (image in its weight region, buffers in its RAM: colibri-board fit)")
    p.add_argument("--app", default="serial_runner", help="with --board: the bare-metal sample "
                   "whose RAM is counted (serial_runner, hello_moe, isr_forward)")
    p.add_argument("--quant", choices=sorted(QUANT_NAMES) + ["mixed"], help="store the feed-forward "
                   "matrices (experts, shared expert, dense layers) as Q8 (int8) or Q4 (int4) "
                   "blocks of 32 with a binary16 scale (docs/format.md 3.3), or as super-blocks "
                   "of 256 at 2 .. 6 bits (qk2 .. qk6: 2.5 .. 6.5 bits a weight, 3.5); routers "
                   "and norms always stay float32, attention and embeddings unless asked below")
    p.add_argument("--quant-attention", action="store_true", help="with --quant: the attention "
                   "projections (q, k, v, o) too")
    p.add_argument("--quant-embeddings", action="store_true", help="with --quant: the token "
                   "embedding and the output projection (LM head) too")
    p.add_argument("--row-groups", action=argparse.BooleanOptionalAction, help="with --quant "
                   "(the default there): store the quantized matrices (but the token embedding) "
                   "in groups of 16 rows, format 1.8 (docs/format.md 3.4; the super-blocks of "
                   "qk2 .. qk6 and --target-bpw: format 1.16, 3.6): the same results, "
                   "read fastest by the x86-64 (AVX2, AVX-512) and AArch64 (NEON, SDOT) kernels "
                   "and as fast, in instructions, by Helium and the Cortex-M DSP table; "
                   "--no-row-groups: row by row, for readers older than format 1.8 (super-"
                   "blocks: 1.16; docs/quantization.md)")
    p.add_argument("--experts-last", action="store_true", help="place every expert block after "
                   "the other tensors' data (format 1.9, docs/format.md 3.2), so that a device "
                   "can hold the start of the image in RAM and read the routed experts from "
                   "storage through its port (docs/core.md, Experts from storage)")
    p.add_argument("--calibration", type=Path, help="a text (tokenized with the checkpoint's "
                   "tokenizer): with --quant mixed the experts it uses most are stored int8, the "
                   "others int4; with --quant qk2 .. qk6 each matrix's rounding error is weighed "
                   "by its inputs' energy on it (an importance matrix, per expert from the tokens "
                   "routed to it)")
    p.add_argument("--target-bpw", type=float, help="instead of --quant: a super-block width "
                   "(qk2 .. qk6) for each matrix --quant qk* would store, chosen by its measured "
                   "error (weighed by --calibration's text when given: hot experts and shared "
                   "matrices then take more bits) so that they take this many bits a weight "
                   "(2.5 .. 6.5, scales included)")
    p.add_argument("--target-size", help="instead of --quant or --target-bpw: the same choice of "
                   "widths, so that model.bin takes at most this many bytes (8G, 512M, 6000000; "
                   "K, M, G, T are powers of 1024): the largest image that fits a device's "
                   "memory or flash")
    p.add_argument("--kv-int8", action="store_true", help="hold the KV cache as int8 with a "
                   "scale per head and position (format 1.15): about a quarter of the state, so "
                   "a board holds about 4x the context (docs/core.md); not for MLA models")
    p.add_argument("--int8-share", type=float, default=0.25, help="with --quant mixed: the "
                   "share of each layer's experts stored int8 (default 0.25)")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    add_version_option(p)
    return p


def _exit_on_signal(signum: int, _frame: object) -> None:
    """SIGTERM or SIGHUP (what `timeout`, a CI cancel or a closed terminal
    send) ends the conversion like Ctrl-C: the staged files are removed."""
    raise SystemExit(128 + signum)


@contextmanager
def _signals_end_the_run() -> Iterator[None]:
    previous = {sig: signal.signal(sig, _exit_on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("colibri-convert: %(message)s"))
    log.addHandler(handler)
    level = log.level
    log.setLevel(logging.WARNING if args.quiet else logging.INFO)
    try:
        with _signals_end_the_run():
            result = convert(args.hf_dir, args.out_dir, context=args.context,
                             alignment=args.alignment, progress=not args.quiet, batch=args.batch,
                             board=args.board, app=args.app, quant=args.quant,
                             quant_attention=args.quant_attention,
                             quant_embeddings=args.quant_embeddings,
                             calibration=args.calibration, int8_share=args.int8_share,
                             row_groups=args.row_groups, experts_last=args.experts_last,
                             target_bpw=args.target_bpw, kv_int8=args.kv_int8,
                             target_size=None if args.target_size is None
                             else parse_size(args.target_size))
    except (ColibriError, OSError) as exc:
        print(f"colibri-convert: error: {exc}", file=sys.stderr)
        return 1
    finally:
        log.removeHandler(handler)
        log.setLevel(level)  # a caller's logging (an in-process run, a test) as it was
    if not args.quiet:
        print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
