"""What a memory budget will give, before running it (colibri-plot budget):
from a routing profile (the `experts:` lines of colibri-run --stats, which
count how often each expert of each layer was chosen), the image's sizes and
a disk bandwidth, predict the expert cache's hit rate, the bytes a decoded
token reads and the decode speed, at each budget.

The cache (ports/linux/colibri_linux_expert_slots.c) gives each MoE layer an
equal share of the slots and keeps each layer's most used experts; in its
steady state it holds, per layer, the `share` experts the profile uses most,
and every other choice is a read of one block. The slots come from the
budget as colibri-run computes them (colibri_linux_budget_slots: the dense
part, the buffers and the 24 MiB reserve first). With fewer slots than one
token's experts (top_k x MoE layers) the slots are overwritten within a token
and what is kept depends on the order of the choices (measured on OLMoE
shapes: 0 with 2 slots a layer, 0.58 of the steady state's 0.75 with 6): the
hit rate then spans 0 .. the steady state's. The steady state ignores recency:
a model that repeats itself (greedy decode of random weights) hits more. A decoded token then reads
(1 - hit rate) x top_k x MoE layers blocks; with `compute` seconds of
arithmetic per token (the in-memory decode) and reads overlapping it (reader
threads) or not at all, the speed lies between 1 / (compute + read) and
1 / max(compute, read), read = bytes / bandwidth.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PROCESS_RESERVE = 24 << 20  # COLIBRI_LINUX_PROCESS_RESERVE (tests compare it with the header)
IO_ALIGN = 4096             # the cache's direct-read alignment (slot = block + 2 x this, rounded)


@dataclass
class Sizes:
    """What the budget split needs of a model (colibri_linux_expert_layout)."""

    dense_bytes: int
    block_bytes: int   # the largest expert block
    held_bytes: int    # KV state, scratch, logits
    moe_layers: int
    experts: int
    top_k: int

    @property
    def slot_bytes(self) -> int:
        return -(-(self.block_bytes + 2 * IO_ALIGN) // IO_ALIGN) * IO_ALIGN

    def slots(self, budget: int) -> int:
        """colibri_linux_budget_slots: 0 below the minimum."""
        fixed = self.dense_bytes + self.held_bytes + PROCESS_RESERVE
        least = max(self.top_k, 3)
        if budget < fixed + least * self.slot_bytes:
            return 0
        return min((budget - fixed) // self.slot_bytes, self.moe_layers * self.experts)


def hit_rate(counts: np.ndarray, slots: int) -> float:
    """The share of choices the steady cache serves: per MoE layer (rows with
    choices), its `slots // layers` most used experts, the remainder of the
    division going one each to the layers whose next expert is used most."""
    rows = counts[counts.sum(axis=1) > 0]
    if rows.size == 0 or slots <= 0:
        return 0.0
    ranked = -np.sort(-rows, axis=1)
    share, extra = divmod(min(slots, rows.size), rows.shape[0])
    served = ranked[:, :share].sum()
    if extra and share < ranked.shape[1]:
        served += np.sort(ranked[:, share])[::-1][:extra].sum()
    return float(served / rows.sum())


def predict(counts: np.ndarray, sizes: Sizes, budgets: list[int], disk_bps: float,
            compute_s: float) -> list[dict]:
    """One row per budget: slots, the hit rate's range, MB read per decoded
    token at the lower hit rate and the decode speed's range (tokens/s: the
    lower hit rate with serial reads .. the higher one with overlapped
    reads); slots 0 marks a budget below the minimum."""
    rows = []
    per_token = sizes.top_k * sizes.moe_layers * sizes.block_bytes
    for budget in budgets:
        slots = sizes.slots(budget)
        high = hit_rate(counts, slots) if slots else 0.0
        low = high if slots >= sizes.top_k * sizes.moe_layers else 0.0
        read_low, read_high = (1 - high) * per_token / disk_bps, (1 - low) * per_token / disk_bps
        rows.append({"budget": budget, "slots": slots, "hit_rate": high, "hit_rate_low": low,
                     "read_mb_per_token": (1 - low) * per_token / 1e6,
                     "tok_s_low": 1 / (compute_s + read_high) if slots else 0.0,
                     "tok_s_high": 1 / max(compute_s, read_low) if slots else 0.0})
    return rows
