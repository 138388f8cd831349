"""A router outside the core (port version 6, the port's `router`; docs/core.md,
A router outside the core), through the Python binding's Engine(router=...).

The test's accelerator computes Mixtral's routing as a fixed-point IP core
might: the router input and matrix in int8 (one scale per token, one per
expert row), int32 products, then softmax, top-k and renormalisation. With
transformers' router replaced by the same function, transformers' logits are
the oracle. Then: the same bits on every kernel table, thread count and chunk
size with the accelerator; the core's own choices given back through the slot
(in another order) give the core's bits; a faulty router (an index out of
range or twice, a weight NaN or infinite, a failure, an exception, a wrong
shape) is refused with its status, the state's position kept, and the same
call run again gives the clean bits; the router observer sees the choices
used."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from colibri_tools.runtime.engine import Engine, EngineError
from cpu_tables import runnable

TOLERANCE = 1e-4


class Int8Router:
    """Mixtral's softmax / top-k / renormalise routing on int8 logits."""

    def __init__(self, hf_model) -> None:
        self.top_k = hf_model.config.num_experts_per_tok
        self.rows = []
        for layer in hf_model.model.layers:
            w = layer.mlp.gate.weight.detach().numpy().astype(np.float64)
            scale = np.abs(w).max(axis=1, keepdims=True) / 127.0
            self.rows.append((np.rint(w / scale).astype(np.int64), scale[:, 0]))
        self.calls = 0

    def choose(self, layer: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """x [n, hidden] -> experts, weights [n, top_k] (weights float32)."""
        q, w_scale = self.rows[layer]
        x = x.astype(np.float64)
        x_scale = np.maximum(np.abs(x).max(axis=1, keepdims=True), 1e-30) / 127.0
        xq = np.rint(x / x_scale).astype(np.int64)
        logits = (xq @ q.T).astype(np.float64) * x_scale * w_scale[None, :]
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        experts = np.argsort(-probs, axis=1, kind="stable")[:, :self.top_k]
        top = np.take_along_axis(probs, experts, axis=1)
        return experts, (top / top.sum(axis=1, keepdims=True)).astype(np.float32)

    def __call__(self, layer: int, x: np.ndarray):
        self.calls += 1
        return self.choose(layer, x)


@pytest.fixture(scope="module")
def mixtral(converted):
    return converted("mixtral")


def _ids(model, n: int, seed: int = 5) -> list[int]:
    return np.random.default_rng(seed).integers(0, model.config.vocab_size, size=n).tolist()


def _hf_logits_routed_by(model, router: Int8Router, ids: list[int]) -> np.ndarray:
    """transformers' logits with every MoE layer's gate replaced by `router`."""
    saved = []
    for index, layer in enumerate(model.model.layers):
        gate = layer.mlp.gate

        def forward(hidden, index=index):
            experts, weights = router.choose(index, hidden.reshape(-1, hidden.shape[-1]).numpy())
            return None, torch.from_numpy(weights), torch.from_numpy(experts)

        saved.append((gate, gate.forward))
        gate.forward = forward
    try:
        with torch.no_grad():
            return model(torch.tensor([ids])).logits[0].float().numpy()
    finally:
        for gate, forward in saved:
            gate.forward = forward


def _digest(image, ids, **engine_args) -> str:
    with Engine(image, context=64, **engine_args) as engine:
        return hashlib.sha256(engine.forward(ids, logits="all").tobytes()).hexdigest()


def test_the_accelerator_routes_as_transformers_would_with_it(mixtral):
    model, image = mixtral
    ids = _ids(model, 40)
    router = Int8Router(model)
    want = _hf_logits_routed_by(model, router, ids)
    given = []

    def logged(layer, x):
        experts, weights = router(layer, x)
        given.append((layer, np.sort(experts, axis=1)))
        return experts, weights

    with Engine(image, context=64, batch=7, routes=True, router=logged) as engine:
        got = engine.forward(ids, logits="all")
        used = engine.routes.experts[:len(ids)].copy()
    assert float(np.abs(got - want).max()) <= TOLERANCE
    layers = len(model.model.layers)
    assert len(given) == layers * 6  # 40 ids in chunks of 7
    for call, (layer, experts) in enumerate(given):  # the observer saw what was used
        pos = (call // layers) * 7
        assert layer == call % layers and (used[pos:pos + len(experts), layer] == experts).all()
    with Engine(image, context=64, routes=True) as engine:  # the core's own router
        own = engine.forward(ids, logits="all")
        core_used = engine.routes.experts[:len(ids)].copy()
    assert (used != core_used).any(), "the int8 router chose as the float one: nothing shown"
    assert float(np.abs(own - want).max()) > TOLERANCE


@pytest.mark.parametrize("table", ["reference", *runnable()])
def test_same_bits_on_every_table_thread_count_and_chunk(mixtral, table):
    model, image = mixtral
    ids = _ids(model, 40)
    want = _digest(image, ids, kernels="reference", threads=1, batch=32, router=Int8Router(model))
    for threads, batch in ((1, 1), (2, 7), (2, 32)):
        assert _digest(image, ids, kernels=table, threads=threads, batch=batch,
                       router=Int8Router(model)) == want, (table, threads, batch)


def test_the_cores_choices_given_back_give_the_cores_bits(mixtral):
    model, image = mixtral
    ids = _ids(model, 24)
    with Engine(image, context=64, batch=5, routes=True) as engine:
        want = engine.forward(ids, logits="all")
        experts = engine.routes.experts[:len(ids)].copy()
        weights = engine.routes.weights[:len(ids)].copy()
    at = {"pos": 0}

    def replay(layer, x):  # the chunk's tokens in order, each token's pairs reversed
        n = x.shape[0]
        pos = at["pos"]
        if layer == len(model.model.layers) - 1:
            at["pos"] += n
        return experts[pos:pos + n, layer, ::-1], weights[pos:pos + n, layer, ::-1]

    with Engine(image, context=64, batch=5, router=replay) as engine:
        got = engine.forward(ids, logits="all")
    assert got.tobytes() == want.tobytes()


def _faulty(model, fault: str, at_call: int):
    """The accelerator, wrong once: at its call number at_call."""
    good = Int8Router(model)
    n_experts = model.config.num_local_experts

    def route(layer, x):
        experts, weights = good(layer, x)
        if good.calls != at_call:
            return experts, weights
        if fault == "index out of range":
            experts[-1, 0] = n_experts
        elif fault == "index negative":
            experts[0, 1] = -1
        elif fault == "expert twice":
            experts[0, 1] = experts[0, 0]
        elif fault in ("weight NaN", "weight infinite"):
            weights[-1, 1] = np.nan if fault == "weight NaN" else np.inf
        elif fault == "failed":
            return None
        elif fault == "exception":
            raise RuntimeError("the accelerator timed out")
        elif fault == "wrong shape":
            return experts[:, :1], weights[:, :1]
        elif fault == "experts as floats":
            return experts.astype(np.float64) + 0.25, weights
        elif fault == "index past uint32":
            experts = experts.astype(np.int64)
            experts[0, 0] = (1 << 32) + int(experts[0, 1] == 0)  # would wrap to a valid one
        elif fault == "experts as booleans":
            return experts > 0, weights
        return experts, weights

    return route


@pytest.mark.parametrize("fault, status", [
    ("index out of range", "COLIBRI_E_BAD_ROUTE"), ("index negative", "COLIBRI_E_BAD_ROUTE"),
    ("expert twice", "COLIBRI_E_BAD_ROUTE"), ("weight NaN", "COLIBRI_E_BAD_ROUTE"),
    ("weight infinite", "COLIBRI_E_BAD_ROUTE"), ("failed", "COLIBRI_E_ROUTER_FAILED"),
    ("exception", "COLIBRI_E_ROUTER_FAILED"), ("wrong shape", "COLIBRI_E_ROUTER_FAILED"),
    ("experts as floats", "COLIBRI_E_ROUTER_FAILED"), ("index past uint32", "COLIBRI_E_BAD_ROUTE"),
    ("experts as booleans", "COLIBRI_E_ROUTER_FAILED")])
def test_a_faulty_router_is_refused_and_loses_nothing(mixtral, fault, status):
    """The fault comes in the second call's second chunk, its second layer
    (the first chunk's keys and values already written): the call fails with
    its status, the position stays, and the same call again (the router right
    now) gives the bits of a run that never failed."""
    model, image = mixtral
    first, second = _ids(model, 9, seed=1), _ids(model, 12, seed=2)
    with Engine(image, context=64, batch=4, router=Int8Router(model)) as engine:
        engine.forward(first)
        want = engine.forward(second, logits="all")
    layers = len(model.model.layers)
    with Engine(image, context=64, batch=4, router=_faulty(model, fault, 4 * layers + 2)) as engine:
        engine.forward(first)
        with pytest.raises(EngineError) as refused:
            engine.forward(second, logits="all")
        assert refused.value.status == status
        assert engine.pos == len(first)
        got = engine.forward(second, logits="all")
    assert got.tobytes() == want.tobytes()
