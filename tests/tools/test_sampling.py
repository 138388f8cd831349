"""The sampler (tools/colibri_tools/runtime/sampling.py) against transformers' own logits
processors on the same logits, against its written definition, and for
reproducibility and the distribution it draws from."""

from __future__ import annotations

import numpy as np
import pytest
from colibri_tools.errors import OptionError
from colibri_tools.runtime.sampling import (
    Sampler,
    SamplingOptions,
    apply_repetition_penalty,
    apply_temperature,
    apply_top_k,
    apply_top_p,
    process,
)

torch = pytest.importorskip("torch")
lp = pytest.importorskip("transformers.generation.logits_process")

VOCAB = 97


def _logits(seed: int, scale: float = 3.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(VOCAB) * scale).astype(np.float32)


def _history(seed: int) -> list[int]:
    return np.random.default_rng(seed + 1000).integers(0, VOCAB, 12).tolist()


def _theirs(processor, logits: np.ndarray, history: list[int]) -> np.ndarray:
    return processor(torch.tensor([history]), torch.tensor(logits[None, :]))[0].numpy()


@pytest.mark.parametrize("seed", range(6))
def test_each_processor_equals_transformers(seed):
    x, history = _logits(seed), _history(seed)
    pairs = [
        (apply_repetition_penalty(x, history, 1.3), lp.RepetitionPenaltyLogitsProcessor(1.3)),
        (apply_repetition_penalty(x, history, 0.8), lp.RepetitionPenaltyLogitsProcessor(0.8)),
        (apply_temperature(x, 0.7), lp.TemperatureLogitsWarper(0.7)),
        (apply_top_k(x, 10), lp.TopKLogitsWarper(10)),
        (apply_top_k(x, 1), lp.TopKLogitsWarper(1)),
        (apply_top_p(x, 0.9), lp.TopPLogitsWarper(0.9)),
        (apply_top_p(x, 0.3), lp.TopPLogitsWarper(0.3)),
        (apply_top_p(x, 0.999), lp.TopPLogitsWarper(0.999)),
    ]
    for ours, processor in pairs:
        theirs = _theirs(processor, x, history)
        assert np.array_equal(np.isinf(ours), np.isinf(theirs)), processor
        assert np.array_equal(ours[np.isfinite(ours)], theirs[np.isfinite(theirs)]), processor


@pytest.mark.parametrize("seed", range(4))
def test_the_chain_equals_transformers_order(seed):
    """Repetition penalty, then temperature, top-k, top-p (generate's order)."""
    x, history = _logits(seed), _history(seed)
    opts = SamplingOptions(temperature=0.8, top_k=30, top_p=0.85, repetition_penalty=1.2)
    theirs = torch.tensor(x[None, :])
    ids = torch.tensor([history])
    for processor in (lp.RepetitionPenaltyLogitsProcessor(1.2), lp.TemperatureLogitsWarper(0.8),
                      lp.TopKLogitsWarper(30), lp.TopPLogitsWarper(0.85)):
        theirs = processor(ids, theirs)
    assert np.array_equal(process(x, history, opts), theirs[0].numpy())


def test_definitions_on_hand_made_logits():
    x = np.array([2.0, -1.0, 0.5, 2.0, -3.0], np.float32)
    assert apply_repetition_penalty(x, [1, 3, 3], 2.0).tolist() == [2.0, -2.0, 0.5, 1.0, -3.0]
    assert apply_top_k(x, 2).tolist() == [2.0, -np.inf, -np.inf, 2.0, -np.inf]  # ties stay
    assert apply_top_k(x, 3).tolist() == [2.0, -np.inf, 0.5, 2.0, -np.inf]
    # softmax of x: 0.4346, 0.0216, 0.0970, 0.4346, 0.0029 (sum 1); top-p 0.5 keeps the
    # two largest (their tail sums: 0.1215 then 0.5561 > 0.5)
    kept = np.isfinite(apply_top_p(x, 0.5))
    assert kept.tolist() == [True, False, False, True, False]
    assert np.isfinite(apply_top_p(x, 1e-6)).sum() == 1  # at least one always stays


def test_greedy_is_the_argmax_after_the_penalty():
    x = np.array([1.0, 3.0, 2.9], np.float32)
    assert Sampler(SamplingOptions()).next(x, []) == 1
    assert Sampler(SamplingOptions(repetition_penalty=1.5)).next(x, [1]) == 2
    assert Sampler(SamplingOptions()).next(np.array([np.nan, 1, 1], np.float32), []) == 1


def test_same_seed_same_tokens():
    opts = SamplingOptions(temperature=1.0, top_k=50, top_p=0.95, seed=1234)
    draws = [[Sampler(opts).next(_logits(i), []) for i in range(40)] for _ in range(2)]
    assert draws[0] == draws[1]
    one = Sampler(opts)
    sequence = [one.next(_logits(0), []) for _ in range(40)]
    other = Sampler(SamplingOptions(temperature=1.0, top_k=50, top_p=0.95, seed=1235))
    assert sequence != [other.next(_logits(0), []) for _ in range(40)]
    assert Sampler(SamplingOptions(temperature=1.0)).seed != Sampler(
        SamplingOptions(temperature=1.0)).seed  # no seed: a fresh random one each time


def test_draws_follow_the_processed_distribution():
    x = np.array([0.0, 1.0, 2.0, -1.0, 0.5, -9.0], np.float32)
    opts = SamplingOptions(temperature=0.9, top_k=4, seed=5)
    sampler, n = Sampler(opts), 20000
    counts = np.bincount([sampler.next(x, []) for _ in range(n)], minlength=x.size)
    p = torch.softmax(torch.tensor(process(x, [], opts), dtype=torch.float64), 0).numpy()
    assert counts[p == 0].sum() == 0  # filtered tokens never come
    sigma = np.sqrt(n * p * (1 - p))
    assert (np.abs(counts - n * p) <= 4.5 * sigma + 1).all(), (counts, n * p)


@pytest.mark.parametrize("opts, message", [
    (SamplingOptions(temperature=-1), "temperature"),
    (SamplingOptions(temperature=float("nan")), "temperature"),
    (SamplingOptions(top_k=-1), "top-k"),
    (SamplingOptions(top_p=0.0), "top-p"),
    (SamplingOptions(top_p=1.5), "top-p"),
    (SamplingOptions(repetition_penalty=0), "repetition penalty"),
    (SamplingOptions(seed=-1), "seed"),
])
def test_bad_options(opts, message):
    with pytest.raises(OptionError, match=message):
        Sampler(opts)
