"""colibri-bench's fidelity columns: how far each engine's next-token
distribution is from transformers' float32 forward on the same prompts.

For each prompt (token ids) the reference is the transformers model's
float32 logits at every position; an engine's logits at the same positions
give, per position, KL(p_ref || p_engine) of the softmax distributions
(computed in float64) and whether the argmax agrees. Reported: mean and
largest KL, and the top-1 agreement over all positions of all prompts; each
prompt's mean KL and the standard error of the mean KL over prompts (the
positions of one prompt share its context, so they are not independent
samples: the prompts are).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def prompts(vocab: int, count: int, length: int, seed: int = 1) -> list[list[int]]:
    """`count` prompts of `length` pseudo-random token ids (fixed by seed)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, size=length).tolist() for _ in range(count)]


def torch_logits(model, ids: Sequence[int]) -> np.ndarray:
    """transformers' float32 logits [len(ids), vocab] for one prompt."""
    import torch

    with torch.no_grad():
        out = model(torch.tensor([list(ids)]), use_cache=False)
    return out.logits[0].float().numpy()


def colibri_logits(image, threads: int = 1) -> Callable[[Sequence[int]], np.ndarray]:
    """A function giving Colibri's logits [len(ids), vocab] for one prompt."""
    from ..runtime.engine import Engine

    def run(ids: Sequence[int]) -> np.ndarray:
        with Engine(image, threads=threads, batch=len(ids), context=len(ids)) as engine:
            return engine.forward(ids, logits="all")
    return run


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def compare(reference: np.ndarray, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per position: (KL(p_ref || p), argmax agreement) of [n, vocab] logits."""
    if reference.shape != logits.shape:
        raise ValueError(f"logits of shape {logits.shape} against a reference {reference.shape}")
    ref, got = _log_softmax(reference), _log_softmax(logits)
    kl = np.sum(np.exp(ref) * (ref - got), axis=-1)
    return np.maximum(kl, 0.0), reference.argmax(axis=-1) == logits.argmax(axis=-1)


def fidelity(references: Sequence[np.ndarray], engine_logits: Sequence[np.ndarray]) -> dict:
    """Mean and largest KL and top-1 agreement over every position of every prompt."""
    kls, agree = [], []
    for ref, got in zip(references, engine_logits, strict=True):
        kl, same = compare(ref, got)
        kls.append(kl)
        agree.append(same)
    kl, same = np.concatenate(kls), np.concatenate(agree)
    per_prompt = np.array([k.mean() for k in kls])
    se = per_prompt.std(ddof=1) / np.sqrt(per_prompt.size) if per_prompt.size > 1 else 0.0
    return {"kl_mean": float(kl.mean()), "kl_max": float(kl.max()),
            "top1_agreement": float(same.mean()), "positions": int(kl.size),
            "kl_prompt_means": per_prompt.tolist(), "kl_mean_se": float(se)}
