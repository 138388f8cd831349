"""What the core's routers chose, recorded through the port's observers
(docs/core.md, Watching the router): the FFN's route (port version 3) and the
attention experts' attention_route (port version 5, JetMoE). The engine
(engine.py) installs both when asked for routes. And a router of the
caller's in place of the core's (port version 6, docs/core.md, A router
outside the core): router_fn."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

ROUTER_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                             ctypes.c_uint32, ctypes.POINTER(ctypes.c_float), ctypes.c_uint32,
                             ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_float))


def router_fn(router) -> ROUTER_FN:
    """The port's router slot for `router(layer, x)`, x float32 [n_tokens,
    hidden] (the router's input), which returns (experts, weights), each
    [n_tokens, top_k], the experts integers (what the core then checks:
    COLIBRI_E_BAD_ROUTE, also for an index outside uint32), or None to fail
    (COLIBRI_E_ROUTER_FAILED, as when it raises or returns arrays of another
    shape, or experts that are not integers). None: the slot stays empty,
    the core routes."""
    if router is None:
        return ROUTER_FN()

    def call(_ctx, layer, n_tokens, hidden, x, top_k, experts, weights) -> int:
        try:
            got = router(layer, np.ctypeslib.as_array(x, shape=(n_tokens, hidden)).copy())
            if got is None:
                return 1
            chosen, weight = np.asarray(got[0]), np.asarray(got[1])
            if chosen.shape != (n_tokens, top_k) or weight.shape != (n_tokens, top_k) or \
                    chosen.dtype == np.bool_ or not np.issubdtype(chosen.dtype, np.integer):
                return 1
            # out of uint32's range: an index the core refuses (not one a cast wraps to)
            outside = (chosen < 0) | (chosen > 0xFFFFFFFF)
            np.ctypeslib.as_array(experts, shape=(n_tokens, top_k))[:] = np.where(
                outside, 0xFFFFFFFF, chosen).astype(np.uint32)
            np.ctypeslib.as_array(weights, shape=(n_tokens, top_k))[:] = weight
        except BaseException:  # noqa: BLE001 - nothing may cross into C, not even Ctrl-C
            return 1
        return 0

    return ROUTER_FN(call)


@dataclass(frozen=True)
class Routes:
    """counts[layer, expert] tokens routed; experts/weights[pos, layer, j] the
    j-th expert of position pos (ascending; an index from n_experts on is a
    zero-computation expert, format 1.12; -1 where nothing was recorded: dense
    layers, positions not yet run); zero[layer] the choices of zero-computation
    experts; attention[layer, expert] the tokens each attention expert took (all
    zero but for a model with attention experts)."""

    counts: np.ndarray     # int64 [n_layers, n_experts]
    experts: np.ndarray    # int32 [context, n_layers, top_k]
    weights: np.ndarray    # float32 [context, n_layers, top_k]
    attention: np.ndarray  # int64 [n_layers, n_experts]
    zero: np.ndarray       # int64 [n_layers]

    @classmethod
    def sized(cls, n_layers: int, n_experts: int, top_k: int, context: int) -> Routes:
        k, e = max(top_k, 1), max(n_experts, 1)
        return cls(np.zeros((n_layers, e), np.int64), np.full((context, n_layers, k), -1, np.int32),
                   np.zeros((context, n_layers, k), np.float32), np.zeros((n_layers, e), np.int64),
                   np.zeros(n_layers, np.int64))

    def record(self, layer: int, pos: int, n_tokens: int, top_k: int,
               experts: ctypes.POINTER(ctypes.c_uint32),
               weights: ctypes.POINTER(ctypes.c_float)) -> None:
        """The FFN router's choices for positions pos .. pos + n_tokens - 1."""
        chosen = np.ctypeslib.as_array(experts, shape=(n_tokens, top_k))
        routed = chosen[chosen < self.counts.shape[1]]
        np.add.at(self.counts[layer], routed, 1)
        self.zero[layer] += chosen.size - routed.size
        self.experts[pos:pos + n_tokens, layer, :top_k] = chosen
        self.weights[pos:pos + n_tokens, layer, :top_k] = np.ctypeslib.as_array(
            weights, shape=(n_tokens, top_k))

    def record_attention(self, layer: int, n_tokens: int, top_k: int,
                         experts: ctypes.POINTER(ctypes.c_uint32)) -> None:
        """The attention experts' router's choices (counted only)."""
        chosen = np.ctypeslib.as_array(experts, shape=(n_tokens, top_k))
        np.add.at(self.attention[layer], chosen.ravel(), 1)
