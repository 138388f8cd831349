"""colibri-convert --target-bpw B (or --target-size SIZE): a bit width for
every matrix from a target (docs/quantization.md). Each candidate matrix (those --quant would store as
super-blocks) is quantized at every width, QK2 .. QK6, and its error
measured as the quantizer weighs it: sum over columns of the column's
importance times the squared weight errors of that column. With a
calibration text the importance is the column's input energy summed over
the tokens that reached the matrix (quant_importance.py), so the error
estimates what the matrix's outputs lose on that text, and a rarely routed
expert, which few tokens reach, counts for little; without one every column
weighs 1 and only the weights' own sensitivity decides.

Then a greedy choice: every matrix starts at QK2, and the upgrade that buys
the most error per byte is taken while the total stays within the budget
(target x weights / 8 bytes): for these convex-ish curves, the smallest
summed error for the bytes. The matrices whose output every later
computation shares (keys, values, the LM head: quant.shared_roles) are not
candidates: they stay QK6, as under --quant qk2 .. qk5, and count in the
target. The summed error does not see how an error propagates, and on a
trained model choosing them too put the LM head at 2.5 bits and doubled the
KL (docs/quantization.md).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import OptionError
from ..image.image_spec import QK_DTYPES, qk_bits
from ..image.image_writer import SourceTensor
from ..image.quant import IN_ROW_GROUPS, matrix_bytes
from ..image.quant_superblock import dequantize_qk, quantize_qk

Key = tuple[int, int, int]  # (role, layer, expert)


@dataclass(frozen=True)
class WidthCost:
    """One matrix at each width (QK_DTYPES order): its bytes (as it will be
    stored: row by row, or in groups of 16 rows) and its error."""

    key: Key
    weights: int
    bytes: tuple[int, ...]
    errors: tuple[float, ...]


def width_cost(source: SourceTensor, row_groups: bool = False) -> WidthCost:
    """Quantize the matrix at every width and measure its weighted error;
    its bytes are those of QK2_R16 .. QK6_R16 with `row_groups` (rows rounded
    up to 16), else of QK2 .. QK6."""
    w = np.asarray(source.load(), dtype=np.float32)
    imp = source.importance
    column_weight = np.ones(w.shape[1]) if imp is None or not np.any(imp > 0) else imp
    errors = []
    for dtype in QK_DTYPES:
        back = dequantize_qk(dtype, quantize_qk(dtype, w, imp), w.shape)
        errors.append(float(np.sum(column_weight * np.sum((back - w) ** 2, axis=0))))
    e = source.entry
    stored = [IN_ROW_GROUPS[d] if row_groups else d for d in QK_DTYPES]
    return WidthCost((e.role, e.layer, e.expert), w.size,
                     tuple(matrix_bytes(d, *w.shape) for d in stored), tuple(errors))


def choose_widths(costs: Sequence[WidthCost], budget: int) -> dict[Key, int]:
    """The dtype of each matrix: the smallest summed error within `budget`
    bytes (greedy, the best error saved per byte first)."""
    level = {c.key: 0 for c in costs}
    spent = sum(c.bytes[0] for c in costs)
    if spent > budget:
        raise OptionError(f"the target: even every matrix at {qk_bits(QK_DTYPES[0])} bits is "
                          f"{spent} bytes, over the budget of {budget}")
    heap = [_upgrade(c, 0) for c in costs if len(QK_DTYPES) > 1]
    heapq.heapify(heap)
    by_key = {c.key: c for c in costs}
    while heap:
        _, key, at = heapq.heappop(heap)
        c = by_key[key]
        extra = c.bytes[at + 1] - c.bytes[at]
        if spent + extra > budget:
            continue  # this one no longer fits; a smaller step of another may
        spent += extra
        level[key] = at + 1
        if at + 2 < len(QK_DTYPES):
            heapq.heappush(heap, _upgrade(c, at + 1))
    return {k: QK_DTYPES[v] for k, v in level.items()}


def _upgrade(c: WidthCost, at: int) -> tuple[float, Key, int]:
    """Heap entry of the step from width `at` to the next: minus the error
    saved per byte (the best first), then the key (ties: table order)."""
    saved = c.errors[at] - c.errors[at + 1]
    return (-saved / max(c.bytes[at + 1] - c.bytes[at], 1), c.key, at)


def budget_bytes(costs: Sequence[WidthCost], target_bpw: float, fixed_bytes: int = 0,
                 fixed_weights: int = 0) -> int:
    """The candidates' bytes: target_bpw x all the super-block matrices' weights
    / 8 (the candidates' and `fixed_weights` more, whose widths are fixed and
    take `fixed_bytes`), less fixed_bytes; checked against the widths' range."""
    weights = sum(c.weights for c in costs) + fixed_weights
    low = 8 * (sum(c.bytes[0] for c in costs) + fixed_bytes) / weights
    high = 8 * (sum(c.bytes[-1] for c in costs) + fixed_bytes) / weights
    if not low <= target_bpw <= high:
        raise OptionError(f"--target-bpw {target_bpw}: these matrices take {low:.3f} .. "
                          f"{high:.3f} bits a weight (QK2 .. QK6, scales and padding included)")
    return int(target_bpw * weights / 8) - fixed_bytes


SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", re.IGNORECASE)
SIZE_SHIFTS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}


def parse_size(text: str) -> int:
    """--target-size: bytes, or K, M, G, T (KiB ... TiB: powers of 1024;
    "8G", "7.5GiB", "512M", "6000000")."""
    found = SIZE.fullmatch(text)
    if found is None:
        raise OptionError(f"--target-size {text!r}: a size such as 8G, 512M or 6000000 (bytes)")
    return int(float(found.group(1)) * (1 << SIZE_SHIFTS[found.group(2).upper()]))


def choose_widths_for_size(costs: Sequence[WidthCost], target: int,
                           image_bytes: Callable[[dict[Key, int]], int]) -> dict[Key, int]:
    """--target-size: the widths whose image (image_bytes(widths): the file as
    written, every tensor and the alignment between them) is at most target
    bytes, the most error saved for them. The budget of the candidates is
    the target less what the rest of the image takes with every candidate at
    QK2; the expert blocks' alignment moves with their sizes, so a choice
    over the target is made again with the overshoot taken off its budget."""
    smallest = {c.key: QK_DTYPES[0] for c in costs}
    least = image_bytes(smallest)
    if least > target:
        raise OptionError(f"--target-size {target}: the image takes at least {least} bytes "
                          f"(every such matrix at {qk_bits(QK_DTYPES[0])} bits)")
    budget = target - (least - sum(c.bytes[0] for c in costs))
    for _ in range(16):
        chosen = choose_widths(costs, budget)
        overshoot = image_bytes(chosen) - target
        if overshoot <= 0:
            return chosen
        budget -= overshoot
    return smallest  # not reached: each round takes the overshoot off the budget
