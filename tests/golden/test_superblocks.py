"""Super-block images (format 1.15, --quant qk2 .. qk6, docs/quantization.md;
in groups of 16 rows by default, 1.16) against transformers' float32 logits,
on tiny models whose widths are multiples of 256 (a super-block's width):
each width's top-1 agreement and KL divergence within the bounds measured
when the format landed, fewer bits never closer, qk4 closer than int4 at the
same size (4.5 bits a weight), and the same bits on every kernel table,
thread count and chunk size, by row and in groups of 16 rows."""
from __future__ import annotations

import numpy as np
import pytest
from colibri_tools.image.image_reader import read_image
from colibri_tools.image.image_spec import (
    BLOCK_BYTES,
    QK_DTYPES,
    QK_R16_DTYPES,
    SUPERBLOCK_DTYPES,
    Role,
)
from cpu_tables import runnable
from golden_helpers import record
from test_bit_identity import assert_same_bits
from test_quant_fidelity import near_transformers

WIDE = {"mixtral": dict(hidden_size=256, intermediate_size=256, head_dim=32),
        "qwen2_moe": dict(hidden_size=256, intermediate_size=256, moe_intermediate_size=256,
                          shared_expert_intermediate_size=256, num_attention_heads=4),
        "olmoe": dict(hidden_size=256, intermediate_size=256, num_attention_heads=4)}
# (top-1, mean KL) measured at seed 1 over 4 prompts x 40 positions: the bounds
# below leave 0.05 of top-1 and 30 % of KL.
MEASURED = {
    "mixtral": {"int4": (0.900, 7.69e-3), "qk2": (0.656, 9.23e-2), "qk3": (0.806, 2.38e-2),
                "qk4": (0.913, 5.92e-3), "qk5": (0.938, 1.57e-3), "qk6": (0.969, 5.00e-4)},
    "qwen2_moe": {"int4": (0.806, 1.87e-2), "qk2": (0.469, 2.08e-1), "qk3": (0.731, 5.21e-2),
                  "qk4": (0.900, 1.21e-2), "qk5": (0.969, 3.49e-3), "qk6": (0.956, 1.16e-3)},
    "olmoe": {"int4": (0.887, 8.56e-3), "qk2": (0.625, 9.16e-2), "qk3": (0.806, 2.44e-2),
              "qk4": (0.900, 5.14e-3), "qk5": (0.962, 1.46e-3), "qk6": (0.981, 4.38e-4)},
}
WIDTHS = ["qk2", "qk3", "qk4", "qk5", "qk6"]


@pytest.fixture(scope="session")
def wide(tmp_path_factory):
    """(family, quant) -> (hf_model, model.bin): the family's 256-wide tiny
    model, converted with --quant `quant` (None: float32)."""
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    models: dict[str, tuple] = {}
    images: dict[tuple, object] = {}

    def get(family: str, quant: str | None, **options):
        if family not in models:
            model, _ = build_model(family, seed=1, **WIDE[family])
            root = tmp_path_factory.mktemp(f"wide_{family}")
            save_checkpoint(model, root / "hf")
            models[family] = (model, root)
        model, root = models[family]
        key = (family, quant, tuple(sorted(options.items())))
        if key not in images:
            out = root / "_".join([quant or "f32", *map(str, options.values())])
            convert(root / "hf", out, context=64, progress=False, quant=quant, **options)
            images[key] = out / "model.bin"
        return model, images[key]

    return get


@pytest.mark.parametrize("family", ["mixtral", "olmoe"])
def test_widths_near_transformers(family, wide, colibri_run, tmp_path):
    found = {}
    for quant in ["int4", *WIDTHS]:
        model, image = wide(family, quant)
        top1, kl = found[quant] = near_transformers(model, image, colibri_run, tmp_path)
        record(f"{family}_wide", f"{quant}_top1_disagreement", 1.0 - top1)
        record(f"{family}_wide", f"{quant}_mean_kl", kl)
        want_top1, want_kl = MEASURED[family][quant]
        assert top1 >= want_top1 - 0.05 and kl <= want_kl * 1.3, (quant, top1, kl)
    kls = [found[q][1] for q in WIDTHS]
    assert kls == sorted(kls, reverse=True), kls  # every bit more is closer
    assert found["qk4"][1] < 0.85 * found["int4"][1], found  # same bytes, 15 % closer at least


# colibri-convert's default (groups of 16 rows), and --no-row-groups
LAYOUTS = {"r16": {}, "by_row": {"row_groups": False}}


@pytest.mark.parametrize("layout, minor, dtype", [("r16", 16, QK_R16_DTYPES[1]),
                                                  ("by_row", 15, QK_DTYPES[1])])
@pytest.mark.parametrize("family", list(WIDE))
def test_image_holds_super_blocks(family, layout, minor, dtype, wide):
    """qk3: QK3_R16 by default (1.16), QK3 with --no-row-groups (1.15); rows
    that are whole groups of 16 take 3.5 bits a weight either way."""
    _, image = wide(family, "qk3", **LAYOUTS[layout])
    read = read_image(image)
    assert read.header["version_minor"] == minor
    experts = [t for t in read.tensors if t.role in (Role.EXPERT_GATE, Role.EXPERT_UP,
                                                        Role.EXPERT_DOWN)]
    assert experts and all(t.dtype == dtype for t in experts)
    for t in experts:
        rows, cols = t.shape
        assert rows % 16 == 0
        assert t.size == rows * (cols // 256) * BLOCK_BYTES[t.dtype] == rows * cols * 3.5 / 8


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("quant", ["qk3", "qk6"])  # levels of 2 + 1 and 4 + 2 bits
@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe"])
def test_widths_bit_identical(family, quant, layout, wide, colibri_run, tmp_path):
    """Every table this CPU runs, threads 1-4 and chunks 1, 7, 40 against the
    reference kernels on one thread, one token at a time (the attention and
    embeddings quantized too: QK6 keys, values and LM head)."""
    model, image = wide(family, quant, quant_attention=True, quant_embeddings=True,
                        **LAYOUTS[layout])
    runs = [("--threads", "2", "--batch", "7"), ("--threads", "4", "--batch", "40"),
            *(("--kernels", t, "--batch", b) for t in runnable() for b in ("1", "7"))]
    assert_same_bits(colibri_run, image, model.config.vocab_size, tmp_path, runs)


def test_calibration_weighs_every_used_expert(wide, tmp_path):
    """--calibration with a super-block width: the importance matrix reaches
    every expert a calibration token was routed to, and changes the image."""
    from colibri_tools.converter.convert import convert

    model, plain = wide("olmoe", "qk3")
    text = tmp_path / "calibration.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 40, "utf-8")
    weighted = tmp_path / "weighted"
    convert(plain.parent.parent / "hf", weighted, context=64, progress=False, quant="qk3",
            calibration=text)
    before, after = read_image(plain), read_image(weighted / "model.bin")
    changed = [a for a, b in zip(after.tensors, before.tensors)
               if after.tensor_bytes(a) != before.tensor_bytes(b)]
    assert changed and all(t.dtype in SUPERBLOCK_DTYPES for t in changed)
    assert {t.role for t in changed} >= {Role.EXPERT_GATE, Role.EXPERT_UP, Role.EXPERT_DOWN}


def _bits_per_weight(image, dtypes=SUPERBLOCK_DTYPES) -> float:
    tensors = [t for t in read_image(image).tensors if t.dtype in dtypes]
    return 8 * sum(t.size for t in tensors) / sum(np.prod(t.shape) for t in tensors)


@pytest.mark.parametrize("target", [2.75, 4.2, 5.5])
def test_target_bpw_is_met_within_one_percent(target, wide):
    """--target-bpw: the super-block matrices (here the feed-forward and the
    attention ones) take the target's bits a weight, within 1 % below it."""
    _, image = wide("olmoe", None, target_bpw=target, quant_attention=True)
    got = _bits_per_weight(image)
    assert 0.99 * target <= got <= target, got


def test_calibrated_widths_differ_and_meet_the_target(wide, tmp_path):
    """With a calibration text the matrices are no longer alike (the tokens
    reach them unevenly): the widths differ, and the target is still met."""
    text = tmp_path / "calibration.txt"
    text.write_text("Colibri runs mixtures of experts on small devices. " * 60, "utf-8")
    _, image = wide("olmoe", None, target_bpw=3.5, calibration=text)
    widths = {t.dtype for t in read_image(image).tensors if t.dtype in SUPERBLOCK_DTYPES}
    assert len(widths) > 1
    assert 0.99 * 3.5 <= _bits_per_weight(image) <= 3.5


def test_quant_report_lists_the_widths(wide, capsys):
    """colibri-quant-report --widths: a row per quantized matrix with its
    dtype as the table holds it, its bytes, and a relative error that the
    wider matrices keep lower."""
    import json

    from colibri_tools.bench.quant_report import main

    _, fp32 = wide("olmoe", None)
    _, image = wide("olmoe", None, target_bpw=2.75, quant_attention=True)
    assert main([str(fp32), str(image), "--widths", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    table = [t for t in read_image(image).tensors if t.dtype in SUPERBLOCK_DTYPES]
    assert [r["bytes"] for r in rows] == [t.size for t in table]
    by_width = {}
    for r in rows:
        by_width.setdefault(r["dtype"], []).append(r["relative_error"])
    assert set(by_width) == {"QK2_R16", "QK3_R16", "QK6_R16"}  # keys and values kept QK6
    assert max(by_width["QK6_R16"]) < min(by_width["QK3_R16"]) and max(by_width["QK3_R16"]) < min(
        by_width["QK2_R16"])
    assert main([str(fp32), str(image), "--widths"]) == 0
    assert "all quantized matrices" in capsys.readouterr().out
