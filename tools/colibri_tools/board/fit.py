"""Will this model fit this board? The planner behind `colibri-board fit`,
`colibri-convert --board` and `make firmware`'s early check.

    colibri-board fit BOARD MODEL_DIR|HF_DIR|config.json [--quant int8|int4]
                      [--context N] [--batch N] [--app APP] [--json]

For a board and a model (a converted MODEL_DIR with model.bin and
model_config.h, a Hugging Face checkpoint folder or cache root, or a bare
config.json) it answers, before anything is built:

- weights: the image's bytes against the board's weight region;
- RAM: KV state + scratch + logits (times the model instances the firmware
  keeps) + stacks + the firmware's own static data, against the board's RAM
  (bare-metal boards), or the image plus those buffers against the board's
  DRAM (Linux boards);
- the largest context that fits that RAM;
- for a sample that pages the routed experts (paged_moe): the image in the
  weight region's storage, read through a driver, and in RAM its start (all
  but the routed experts) and the largest expert cache the rest of the RAM
  holds (docs/core.md, An expert cache in caller memory);
- a projected decode speed: the board's read bandwidth of the weight memory
  ([weights] bandwidth, with its source in the board file) over the bytes of
  weights one decoded token reads. A ceiling, not a measurement.

Every size comes from colibri_tools.image.sizes (the numbers model_config.h states
and the C core computes); the stacks from the board file (the same numbers
memory.ld gives the linker).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..converter.checkpoint import CONFIG_NAME, read_json, resolve_model_dir
from ..converter.families import model_spec
from ..errors import ColibriError, OptionError
from ..image.image_layout import expert_blocks
from ..image.image_spec import (
    DEFAULT_ALIGNMENT,
    FLAG_EXPERTS_LAST,
    Arch,
    FfnKind,
    ModelRecord,
)
from ..image.quant import weights_name
from ..image.sizes import (
    MAX_BATCH,
    decode_bytes_per_token,
    expert_cache_fixed_size,
    expert_cache_size,
    expert_slot_size,
    logits_size,
    placed_tensors,
    scratch_size,
    state_size,
)
from .boards import PORT_STACKS, Board

DEFAULT_CONTEXT_CAP = 2048  # = colibri-convert's default: min(max_context, 2048)
DEFAULT_APP = "serial_runner"
IMAGE_NAME, HEADER_NAME = "model.bin", "model_config.h"
BUFFER_ALIGN = 16           # the samples' _Alignas(16) on the KV state and scratch

# RAM a firmware uses besides the model buffers and the stacks: its .data and
# .bss (the serial runner's frames, the colibri_model struct, console state,
# the AArch64 page tables and the page alignment of its stacks). Measured
# from `make firmware` builds of each sample (GCC 12, the demo model at
# context 64) and rounded up with room for alignment; tests/tools/test_fit.py
# checks a build against it.
#   Cortex-M: serial_runner 9,096 B, hello_moe 328 B, isr_forward 432 B.
#   AArch64:  serial_runner 85,056 B, hello_moe 76,864 B, isr_forward 75,904 B.
# paged_moe (its pin list, command line and the cache's struct): Cortex-M
# 2,366 B, AArch64 75,878 B; paged_runner 10,070 B and 85,750 B.
FIRMWARE_STATIC = {
    "baremetal-cortex-m": {"serial_runner": 10 << 10, "hello_moe": 1 << 10, "isr_forward": 1 << 10,
                           "paged_moe": 3 << 10, "paged_runner": 11 << 10},
    "baremetal-aarch64": {"serial_runner": 92 << 10, "hello_moe": 84 << 10,
                          "isr_forward": 84 << 10, "paged_moe": 84 << 10, "paged_runner": 92 << 10},
}
# How many (KV state, scratch, logits) sets each sample keeps.
MODEL_INSTANCES = {"serial_runner": 1, "hello_moe": 1, "isr_forward": 2, "paged_moe": 1,
                   "paged_runner": 1}
# Samples that page the routed experts from storage, and the rows of logits
# each keeps (paged_moe prints the prompt's: 8).
PAGED_APPS = {"paged_moe": 8, "paged_runner": 1}
MIN_SLOTS = 2  # COLIBRI_EXPERTS_HELD: the fewest slots the core works with


class FitError(ColibriError):
    """The planner cannot read the model or the board."""


# ---- the model ------------------------------------------------------------------

@dataclass(frozen=True)
class ModelFacts:
    """What the planner needs to know about a model."""

    source: str
    kind: str                  # "image" (converted) or "config" (checkpoint / config.json)
    family: str
    record: ModelRecord
    image_bytes: int
    bytes_per_token: int
    alignment: int
    context: int               # the converted context, or colibri-convert's default
    batch: int
    weights: str               # "fp32", "int8", "int4"
    # Paging (its experts last: as converted, or for a checkpoint as
    # colibri-convert --experts-last would write it).
    resident_bytes: int = 0    # the image's start: all but the routed experts
    blocks: int = 0            # routed expert blocks
    slot_bytes: int = 0        # one expert cache slot
    experts_last: bool = True
    shortcut: bool = False     # a shortcut layer (format 1.12): a scratch region more
    conv_layers: int = 0       # recurrent layers (1.13, 1.14): a fixed state, no KV cache
    ffn_only_layers: int = 0   # layers without an operator (1.14): neither


def _header_ints(path: Path) -> dict[str, int]:
    """The COLIBRI_MODEL_* integer macros of a model_config.h."""
    found = re.findall(r"#define\s+COLIBRI_MODEL_(\w+)\s+(0x[0-9A-Fa-f]+|\d+)u", path.read_text())
    return {name: int(value, 0) for name, value in found}


def _from_image(path: Path, header: Path | None) -> ModelFacts:
    from ..image.image_reader import read_image

    image = read_image(path)
    r = image.record
    macros = _header_ints(header) if header is not None and header.is_file() else {}
    context = macros.get("CONTEXT", min(r.max_context, DEFAULT_CONTEXT_CAP))
    family = Arch(image.arch).name.lower() if image.arch in Arch._value2member_map_ else "?"
    blocks = image.expert_blocks()
    return ModelFacts(str(path), "image", family, r, image.image_size,
                      decode_bytes_per_token(r, image.tensors), image.alignment, context,
                      macros.get("BATCH", 1), weights_name(image.tensors), image.resident_size,
                      len(blocks), expert_slot_size([b.size for b in blocks]),
                      bool(image.header["flags"] & FLAG_EXPERTS_LAST), image.shortcut,
                      image.conv_layers, image.ffn_only_layers)


def facts_from_spec(spec, source: str, *, alignment: int = DEFAULT_ALIGNMENT,
                    quant: str | None = None, context: int | None = None,
                    batch: int = 1) -> ModelFacts:
    """ModelFacts of a families.ModelSpec (what colibri-convert would write)."""
    r = spec.record
    tensors, size = placed_tensors(r, spec.ffn_kinds, alignment, quant,
                                   attn_kinds=spec.attn_kinds)
    paged, _ = placed_tensors(r, spec.ffn_kinds, alignment, quant, experts_last=True,
                              attn_kinds=spec.attn_kinds)
    blocks = expert_blocks(paged)
    resident = min((b.offset for b in blocks), default=size)
    context = min(r.max_context, DEFAULT_CONTEXT_CAP) if context is None else context
    return ModelFacts(source, "config", spec.family, r, size, decode_bytes_per_token(r, tensors),
                      alignment, context, batch, quant or "fp32", resident, len(blocks),
                      expert_slot_size([b.size for b in blocks]),
                      shortcut=FfnKind.SHORTCUT in spec.ffn_kinds,
                      conv_layers=spec.conv_layers, ffn_only_layers=spec.ffn_only_layers)


def _from_config(path: Path, alignment: int, quant: str | None) -> ModelFacts:
    spec = model_spec(read_json(path), path)
    return facts_from_spec(spec, str(path.parent if path.name == CONFIG_NAME else path),
                           alignment=alignment, quant=quant)


def load_model(source: str | Path, *, quant: str | None = None,
               alignment: int = DEFAULT_ALIGNMENT) -> ModelFacts:
    """A converted MODEL_DIR (model.bin + model_config.h) or model.bin, a Hugging
    Face checkpoint folder (or cache root with snapshots/), or a config.json."""
    path = Path(source)
    if path.is_dir() and (path / IMAGE_NAME).is_file():
        path = path / IMAGE_NAME
    if path.is_file() and path.suffix != ".json":
        if quant is not None:
            raise OptionError(f"{path} is a converted image: its weights are already stored; "
                              "--quant applies to a checkpoint or config.json")
        return _from_image(path, path.parent / HEADER_NAME)
    if path.is_dir():
        path = resolve_model_dir(path) / CONFIG_NAME
    if not path.is_file():
        raise FitError(f"{source}: no {IMAGE_NAME}, {CONFIG_NAME} or Hugging Face cache "
                       "folder found there")
    return _from_config(path, alignment, quant)


# ---- the board's budget ----------------------------------------------------------

@dataclass(frozen=True)
class Budget:
    """Bytes one model instance needs at a context, and what the firmware adds."""

    state: int
    scratch: int
    logits: int
    instances: int
    stacks: int
    firmware: int
    image_in_ram: int          # Linux boards: the mapped image is resident too;
                               # paging samples: the image's start
    cache: int = 0             # paging samples: the expert cache's arena

    @property
    def per_instance(self) -> int:
        return _round(self.state) + _round(self.scratch) + _round(self.logits)

    @property
    def total(self) -> int:
        return (self.instances * self.per_instance + self.stacks + self.firmware
                + self.image_in_ram + self.cache)


def _round(n: int) -> int:
    return -(-n // BUFFER_ALIGN) * BUFFER_ALIGN


def stack_bytes(board: Board) -> int:
    return sum(board.stacks.get(key, 0) for key, _, _ in PORT_STACKS.get(board.port, ()))


def firmware_static(board: Board, app: str) -> int | None:
    """The firmware's own RAM besides model buffers and stacks; None if not known."""
    return FIRMWARE_STATIC.get(board.port, {}).get(app)


def budget(board: Board, model: ModelFacts, context: int, batch: int, app: str,
           slots: int = MIN_SLOTS) -> Budget:
    """The RAM at a context; a paging sample's with an expert cache of `slots`."""
    r = model.record
    linux = board.port == "linux"
    quantized = model.weights != "fp32"
    paged = not linux and app in PAGED_APPS
    state = state_size(r, context, model.conv_layers, model.ffn_only_layers)
    return Budget(state, scratch_size(r, context, batch, quantized, model.shortcut),
                  logits_size(r) * PAGED_APPS.get(app, 1) if paged else logits_size(r),
                  1 if linux else MODEL_INSTANCES.get(app, 1),
                  stack_bytes(board), 0 if linux else (firmware_static(board, app) or 0),
                  model.image_bytes if linux else model.resident_bytes if paged else 0,
                  expert_cache_size(r, model.slot_bytes, slots) if paged else 0)


def cache_slots(board: Board, model: ModelFacts, context: int, batch: int, app: str) -> int:
    """The most expert cache slots (at most one per block) the RAM holds
    besides everything else; 0 when not even MIN_SLOTS do."""
    spare = board.ram.length - budget(board, model, context, batch, app, 0).total
    slots = (spare - expert_cache_fixed_size(model.record)) // (16 + model.slot_bytes) \
        if model.slot_bytes else 0
    return min(slots, model.blocks) if slots >= MIN_SLOTS else 0


def largest_context(board: Board, model: ModelFacts, batch: int, app: str) -> int:
    """The largest context (1 .. max_context) whose buffers fit the board's RAM; 0 if none."""
    if board.ram is None:
        return 0
    lo, hi = 0, model.record.max_context
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if budget(board, model, mid, batch, app).total <= board.ram.length:
            lo = mid
        else:
            hi = mid - 1
    return lo


# ---- the report -----------------------------------------------------------------

@dataclass
class FitReport:
    board: str
    port: str
    model: dict
    context: int
    batch: int
    app: str
    image_bytes: int
    weight_region: dict
    image_fits: bool
    ram: dict | None
    ram_fits: bool | None
    largest_context: int | None
    bytes_per_token: int
    bandwidth: float | None
    bandwidth_source: str
    tokens_per_s: float | None
    notes: list[str] = field(default_factory=list)
    paged: dict | None = None  # paging samples: resident, slots, blocks, slot_bytes, cache

    @property
    def fits(self) -> bool:
        return self.image_fits and self.ram_fits is not False

    def to_json(self) -> str:
        return json.dumps(asdict(self) | {"fits": self.fits}, indent=1)


def _ram_section(board: Board, b: Budget) -> dict:
    region = board.ram
    parts = {"kv_state": b.state, "scratch": b.scratch, "logits": b.logits,
             "instances": b.instances, "stacks": b.stacks, "firmware": b.firmware}
    if b.image_in_ram:
        parts["image"] = b.image_in_ram
    if b.cache:
        parts["expert_cache"] = b.cache
    return parts | {"total": b.total, "origin": region.origin, "size": region.length}


def plan(board: Board, model: ModelFacts, *, context: int | None = None,
         batch: int | None = None, app: str = DEFAULT_APP) -> FitReport:
    """The planner's answer for one board and one model."""
    r = model.record
    context = model.context if context is None else context
    batch = model.batch if batch is None else batch
    if not 1 <= context <= r.max_context:
        raise OptionError(f"--context {context}: must be 1 .. {r.max_context} "
                          "(the model's max_position_embeddings)")
    if not 1 <= batch <= MAX_BATCH:
        raise OptionError(f"--batch {batch}: must be 1 .. {MAX_BATCH}")
    w = board.weights
    notes = []
    image_fits = model.image_bytes <= w.length and w.origin % model.alignment == 0
    if w.origin % model.alignment:
        notes.append(f"weight address 0x{w.origin:08X} is not a multiple of the model's "
                     f"expert-block alignment {model.alignment}")
    ram, ram_fits, largest, paged = None, None, None, None
    if board.ram is not None and board.bare_metal and app in PAGED_APPS:
        paged = _paged_plan(board, model, context, batch, app, notes)
        b = budget(board, model, context, batch, app, max(paged["slots"], MIN_SLOTS))
        ram, ram_fits = _ram_section(board, b), paged["slots"] >= MIN_SLOTS
        largest = largest_context(board, model, batch, app)
        image_fits = image_fits and model.experts_last
    elif board.ram is not None:
        b = budget(board, model, context, batch, app)
        ram, ram_fits = _ram_section(board, b), b.total <= board.ram.length
        largest = largest_context(board, model, batch, app)
        if board.bare_metal and firmware_static(board, app) is None:
            notes.append(f"app {app!r}: its own static RAM is not known to the planner "
                         f"(known: {', '.join(MODEL_INSTANCES)}); counted as 0")
    else:
        notes.append(f"board {board.name} has no [memory.ram]: RAM not checked")
    speed = board.bandwidth / model.bytes_per_token if board.bandwidth else None
    return FitReport(board.name, board.port,
                     {"source": model.source, "kind": model.kind, "family": model.family,
                      "weights": model.weights, "layers": r.n_layers, "experts": r.n_experts,
                      "top_k": r.top_k, "vocab": r.vocab_size, "max_context": r.max_context},
                     context, batch, app, model.image_bytes,
                     {"origin": w.origin, "size": w.length}, image_fits, ram, ram_fits, largest,
                     model.bytes_per_token, board.bandwidth, board.bandwidth_source, speed, notes,
                     paged)


def _paged_plan(board: Board, model: ModelFacts, context: int, batch: int, app: str,
                notes: list[str]) -> dict:
    """The expert cache a paging sample gets: the most slots the RAM holds."""
    slots = cache_slots(board, model, context, batch, app)
    if not model.experts_last:
        notes.append("the image's experts are not last: convert with colibri-convert "
                     "--experts-last to page them (docs/format.md 3.2)")
    if model.blocks == 0:
        notes.append("the model has no routed experts to page")
    return {"resident": model.resident_bytes, "blocks": model.blocks,
            "slot_bytes": model.slot_bytes, "slots": slots,
            "cache": expert_cache_size(model.record, model.slot_bytes, slots) if slots else 0}


def size_text(n: float) -> str:
    """Bytes with a binary unit: 524288 -> '512.0 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _verdict(need: int, have: int) -> str:
    if need <= have:
        return f"fits ({100 * need / have:.1f} % used, {size_text(have - need)} free)"
    return f"DOES NOT FIT: {size_text(need - have)} ({need - have} bytes) over"


def _image_verdict(rep: FitReport) -> str:
    if rep.paged is not None and not rep.image_fits and rep.image_bytes <= rep.weight_region["size"]:
        return "DOES NOT FIT: the routed experts are not last (colibri-convert --experts-last)"
    if rep.image_bytes <= rep.weight_region["size"] and not rep.image_fits:
        return "DOES NOT FIT: the weight address does not suit the model's alignment"
    return _verdict(rep.image_bytes, rep.weight_region["size"])


def _row(label: str, value: int, extra: str = "") -> str:
    return f"  {label:<22}{value:>14,} B  {size_text(value):>10}  {extra}".rstrip()


def format_report(rep: FitReport) -> str:
    m, w = rep.model, rep.weight_region
    lines = [f"{m['source']} ({m['family']}, {m['weights']} weights: {m['layers']} layers, "
             f"{m['experts']} experts top-{m['top_k']}, vocab {m['vocab']}) on {rep.board}",
             f"context {rep.context}, prompt chunks of {rep.batch}"
             + ("" if rep.port == "linux" else f", app {rep.app}"), "",
             "weights",
             _row("image", rep.image_bytes),
             _row("weight region", w["size"], f"at 0x{w['origin']:08X}"
                  if rep.port != "linux" else "(largest image meant for the board)"),
             f"  -> {_image_verdict(rep)}", ""]
    if rep.ram is not None:
        r = rep.ram
        times = f" x {r['instances']}" if r["instances"] > 1 else ""
        mapped = "image" in r and rep.paged is None
        lines += ["RAM" + (" (DRAM: the image is mapped and resident)" if mapped else ""),
                  _row(f"KV state{times}", r["kv_state"], f"{rep.context} positions"),
                  _row(f"scratch{times}", r["scratch"], f"chunks of {rep.batch}"),
                  _row(f"logits{times}", r["logits"])]
        paged = rep.paged
        lines += [_row("image", r["image"])] if "image" in r and paged is None else []
        if paged is not None:
            lines += [_row("image's start", r["image"], "all but the routed experts"),
                      _row("expert cache", r["expert_cache"],
                           f"{max(paged['slots'], MIN_SLOTS)} of {paged['blocks']} blocks, "
                           f"{paged['slot_bytes']:,} B a slot"
                           + ("" if paged["slots"] else " (the fewest)"))]
        lines += [_row("stacks", r["stacks"])] if r["stacks"] else []
        lines += [_row("firmware", r["firmware"], "static data besides the model")] \
            if rep.port != "linux" else []
        lines += [_row("total", r["total"]),
                  _row("RAM", r["size"], f"at 0x{r['origin']:08X}" if rep.port != "linux" else ""),
                  f"  -> {_verdict(r['total'], r['size'])}",
                  f"  largest context that fits: {rep.largest_context}"
                  + (f" (the model allows {m['max_context']})" if rep.largest_context
                     == m["max_context"] else ""), ""]
    if rep.paged is not None:
        lines[lines.index("weights")] = "weights (in storage, read through the board's driver)"
    lines.append("decode (memory-bound ceiling)")
    lines.append(_row("weights read per token", rep.bytes_per_token))
    if rep.tokens_per_s is not None:
        lines.append(f"  at {rep.bandwidth / 1e6:,.0f} MB/s: at most {rep.tokens_per_s:,.1f} "
                     f"tokens/s ({rep.bandwidth_source})")
    else:
        lines.append("  no projection: the board file gives no [weights] bandwidth"
                     + (f" ({rep.bandwidth_source})" if rep.bandwidth_source else ""))
    lines += [f"note: {n}" for n in rep.notes]
    lines += ["", "fits" if rep.fits else "DOES NOT FIT"]
    return "\n".join(lines)


def refusal(rep: FitReport) -> str:
    """One message for colibri-convert --board and make firmware: what does
    not fit, by how much, and the largest context that would."""
    parts = []
    if rep.paged is not None:
        return _paged_refusal(rep)
    if not rep.image_fits:
        w = rep.weight_region
        parts.append(f"the model image is {rep.image_bytes} bytes ({size_text(rep.image_bytes)}) "
                     f"but {rep.board}'s weight region at 0x{w['origin']:08X} holds "
                     f"{w['size']} bytes ({size_text(w['size'])})")
    if rep.ram_fits is False:
        r = rep.ram
        times = f"{r['instances']} x " if r["instances"] > 1 else ""
        parts.append(
            f"the RAM buffers do not fit {rep.board}: {times}(KV state {r['kv_state']} bytes "
            f"for context {rep.context} + scratch {r['scratch']} + logits {r['logits']}) + "
            f"stacks {r['stacks']} + firmware {r['firmware']}"
            + (f" + image {r['image']}" if "image" in r else "")
            + f" = {r['total']} bytes, but the RAM is {r['size']} bytes "
            f"({r['total'] - r['size']} over)")
        if rep.largest_context:
            parts.append(f"the largest context that fits is {rep.largest_context}: convert with "
                         f"colibri-convert ... --context {rep.largest_context}")
        else:
            parts.append("no context fits: this model needs a board with more RAM")
    return "; ".join(parts)


def _paged_refusal(rep: FitReport) -> str:
    parts, p = [], rep.paged
    if rep.image_bytes > rep.weight_region["size"]:
        parts.append(f"the model image is {rep.image_bytes} bytes but {rep.board}'s weight "
                     f"storage holds {rep.weight_region['size']} bytes")
    elif not rep.image_fits:
        parts.append("its routed experts are not last in the image: convert with "
                     "colibri-convert ... --experts-last")
    if rep.ram_fits is False and not parts:
        r = rep.ram
        parts.append(f"the RAM ({r['size']} bytes) cannot hold the image's start "
                     f"({p['resident']} bytes), the buffers for context {rep.context} and an "
                     f"expert cache of {MIN_SLOTS} slots of {p['slot_bytes']} bytes "
                     f"(with it: {r['total']} bytes)")
    return "; ".join(parts)
