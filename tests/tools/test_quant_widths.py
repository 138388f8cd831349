"""colibri-convert --target-bpw's choice of widths (quant_widths.py) on
made-up costs: the budget is kept, the best error per byte goes first, and
targets outside the widths' range are refused."""
from __future__ import annotations

import pytest
from colibri_tools.converter.quant_widths import WidthCost, budget_bytes, choose_widths, width_cost
from colibri_tools.errors import OptionError
from colibri_tools.image.image_spec import QK_DTYPES

BYTES = (80, 112, 144, 176, 208)  # one 256-weight super-block at QK2 .. QK6


def _cost(i: int, errors: tuple[float, ...]) -> WidthCost:
    return WidthCost((48, 0, i), 256, BYTES, errors)


def _total(costs, chosen) -> int:
    return sum(c.bytes[QK_DTYPES.index(chosen[c.key])] for c in costs)


def test_budget_kept_and_nearly_spent():
    costs = [_cost(i, tuple(10.0 * (i + 1) / 4 ** b for b in range(5))) for i in range(200)]
    for bpw in (2.6, 3.0, 3.7, 4.5, 6.0):
        budget = budget_bytes(costs, bpw)
        spent = _total(costs, choose_widths(costs, budget))
        assert 0.99 * budget <= spent <= budget, (bpw, spent, budget)


def test_the_most_error_per_byte_goes_first():
    flat = _cost(0, (1.0, 0.9, 0.8, 0.7, 0.6))
    steep = _cost(1, (100.0, 10.0, 1.0, 0.1, 0.01))
    chosen = choose_widths([flat, steep], 80 + 80 + 2 * 32)
    assert chosen[steep.key] == QK_DTYPES[2] and chosen[flat.key] == QK_DTYPES[0]


def test_targets_outside_the_widths_are_refused():
    costs = [_cost(0, (4.0, 3.0, 2.0, 1.0, 0.5))]
    with pytest.raises(OptionError, match="2.500 .. 6.500"):
        budget_bytes(costs, 2.0)
    with pytest.raises(OptionError, match="2.500 .. 6.500"):
        budget_bytes(costs, 7.0)
    with pytest.raises(OptionError, match="over the budget"):
        choose_widths(costs, 79)


def test_chosen_widths_err_less_than_one_width():
    """On real error curves (matrices of different scales, skewed column
    importance) the choice for 3.5 bits a weight errs less, summed, than
    every matrix at QK3, which takes the same bytes."""
    import numpy as np
    from colibri_tools.image.image_spec import TensorEntry
    from colibri_tools.image.image_writer import SourceTensor

    rng = np.random.default_rng(3)
    costs = []
    for i in range(12):
        w = (rng.standard_normal((64, 256)) * (0.2 + i % 4)).astype(np.float32)
        imp = rng.exponential(1.0 + 3 * (i % 3), 256)
        entry = TensorEntry(48, 0, i, (64, 256), QK_DTYPES[1])
        costs.append(width_cost(SourceTensor(entry, lambda w=w: w, imp)))
    uniform = sum(c.bytes[1] for c in costs)
    chosen = choose_widths(costs, uniform)
    summed = sum(c.errors[QK_DTYPES.index(chosen[c.key])] for c in costs)
    assert _total(costs, chosen) <= uniform
    assert summed < 0.95 * sum(c.errors[1] for c in costs)
