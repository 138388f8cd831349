"""Choosing the next token from the engine's logits, as transformers' generate
does it: the repetition penalty, then temperature, top-k and top-p, then a
draw from the softmax with a seeded generator (reproducible: the same seed,
logits and options give the same tokens on every machine).

    sampler = Sampler(SamplingOptions(temperature=0.8, top_k=40, top_p=0.95, seed=7))
    token = sampler.next(logits, history)        # history: the ids so far (prompt + generated)

The processors follow their definitions in transformers (logits_process.py;
tests/tools/test_sampling.py compares them with transformers' own
RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper
and TopPLogitsWarper on the same logits), in float32 as torch computes them:

  repetition penalty p: every id that occurs in the history has its logit
      s replaced by s * p if s < 0 else s / p (greedy decoding too);
  temperature t: s / t (t = 0 means greedy: the argmax, ties to the lowest id);
  top-k k: logits below the k-th largest become -inf (ties with it stay);
  top-p p: sorted ascending, softmax, running sum; tokens whose running sum
      is <= 1 - p become -inf, the largest always stays.

The draw: probabilities from the processed logits (float64 softmax), one
uniform number u in [0, 1) from numpy's PCG64 seeded with `seed`, and the
first token whose cumulative probability exceeds u times the total.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import OptionError


@dataclass(frozen=True)
class SamplingOptions:
    temperature: float = 0.0       # 0: greedy
    top_k: int = 0                 # 0: off
    top_p: float = 1.0             # 1: off
    repetition_penalty: float = 1.0
    seed: int | None = None        # None: a random seed (Sampler.seed tells which)

    def check(self) -> SamplingOptions:
        if not (self.temperature >= 0 and np.isfinite(self.temperature)):
            raise OptionError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise OptionError(f"top-k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise OptionError(f"top-p must be in (0, 1], got {self.top_p}")
        if not (self.repetition_penalty > 0 and np.isfinite(self.repetition_penalty)):
            raise OptionError(f"repetition penalty must be > 0, got {self.repetition_penalty}")
        if self.seed is not None and not 0 <= self.seed < 1 << 64:
            raise OptionError(f"seed must be 0 .. 2^64-1, got {self.seed}")
        return self

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def apply_repetition_penalty(logits: np.ndarray, history: Sequence[int],
                             penalty: float) -> np.ndarray:
    out = np.array(logits, dtype=np.float32)
    if penalty == 1.0 or len(history) == 0:
        return out
    ids = np.unique(np.asarray(history, dtype=np.int64))
    ids = ids[(ids >= 0) & (ids < out.size)]
    s = out[ids]
    out[ids] = np.where(s < 0, s * np.float32(penalty), s / np.float32(penalty))
    return out


def apply_temperature(logits: np.ndarray, temperature: float) -> np.ndarray:
    return np.asarray(logits, dtype=np.float32) / np.float32(temperature)


def apply_top_k(logits: np.ndarray, k: int) -> np.ndarray:
    out = np.array(logits, dtype=np.float32)
    if k <= 0 or k >= out.size:
        return out
    kth = np.partition(out, out.size - k)[out.size - k]
    out[out < kth] = -np.inf
    return out


def _softmax32(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(), dtype=np.float32)
    return e / e.sum(dtype=np.float32)


def apply_top_p(logits: np.ndarray, p: float) -> np.ndarray:
    out = np.array(logits, dtype=np.float32)
    if p >= 1.0:
        return out
    order = np.argsort(out, kind="stable")
    cumulative = np.cumsum(_softmax32(out[order]), dtype=np.float32)
    remove = cumulative <= np.float32(1 - p)
    remove[-1] = False  # keep at least one token
    out[order[remove]] = -np.inf
    return out


def process(logits: np.ndarray, history: Sequence[int], opts: SamplingOptions) -> np.ndarray:
    """The logits after every processor the options ask for (not the draw)."""
    out = apply_repetition_penalty(logits, history, opts.repetition_penalty)
    if opts.greedy:
        return out
    if opts.temperature != 1.0:
        out = apply_temperature(out, opts.temperature)
    out = apply_top_k(out, opts.top_k)
    return apply_top_p(out, opts.top_p)


def argmax(values: np.ndarray) -> int:
    """Ties to the lowest id and NaN below every number (colibri_argmax's rule)."""
    v = np.where(np.isnan(values), -np.inf, values)
    if np.isneginf(v).all():
        return 0
    return int(np.argmax(v))


class Sampler:
    """Options plus the seeded generator: next() gives one token."""

    def __init__(self, opts: SamplingOptions) -> None:
        self.opts = opts.check()
        self.seed = opts.seed if opts.seed is not None else random.SystemRandom().getrandbits(63)
        self._rng = np.random.Generator(np.random.PCG64(self.seed))

    def next(self, logits: np.ndarray, history: Sequence[int]) -> int:
        processed = process(logits, history, self.opts)
        if self.opts.greedy:
            return argmax(processed)
        finite = np.isfinite(processed)
        if not finite.any():
            return argmax(np.asarray(logits, dtype=np.float32))
        x = processed.astype(np.float64)
        weights = np.where(finite, np.exp(x - x[finite].max()), 0.0)
        cumulative = np.cumsum(weights)
        u = self._rng.random() * cumulative[-1]
        return int(min(np.searchsorted(cumulative, u, side="right"), cumulative.size - 1))
