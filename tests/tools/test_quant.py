"""The numpy quantizer against docs/format.md 3.3, byte for byte: blocks
written out here with struct from the rule in the document, not with the
code under test."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch
from colibri_tools.errors import OptionError
from colibri_tools.image.quant import dequantize, first_bad_scale, matrix_bytes, quantize

Q8, Q4, Q8_R16, Q4_R16 = 1, 2, 3, 4


def _half(value: float) -> bytes:
    return struct.pack("<e", value)


def test_q8_block_layout_by_hand():
    row = np.array([1.0, -2.0, 0.5, 127.0 / 64] + [0.0] * 28 + [0.25, 3.0], dtype=np.float32)
    data = quantize(Q8, row[None, :])
    assert len(data) == matrix_bytes(Q8, 1, 34) == 2 * 34
    d0 = np.float16(2.0 / 127)  # amax of block 0 is 2
    q0 = [int(np.round(np.float32(v) / np.float32(d0))) for v in row[:32]]
    d1 = np.float16(3.0 / 127)
    q1 = [int(np.round(np.float32(v) / np.float32(d1))) for v in row[32:]] + [0] * 30  # padding
    want = (_half(float(d0)) + struct.pack("<32b", *q0) + _half(float(d1))
            + struct.pack("<32b", *q1))
    assert data == want
    assert q0[1] == -127 and q1[1] == 127 and len(row) == 34


def test_q4_block_layout_by_hand():
    w = np.linspace(-1.0, 0.75, 32, dtype=np.float32)  # largest magnitude: -1.0
    data = quantize(Q4, w[None, :])
    d = np.float16(-1.0 / -8)
    q = [min(15, max(0, int(np.round(np.float32(v) / np.float32(d))) + 8)) for v in w]
    packed = bytes(q[j] | (q[j + 16] << 4) for j in range(16))
    assert data == _half(float(d)) + packed
    assert q[0] == 0  # the signed maximum maps to nibble 0 exactly
    back = dequantize(Q4, data, (1, 32))
    assert back[0, 0] == -1.0


def test_dequantize_is_scale_times_level_and_bounded():
    rng = np.random.default_rng(1)
    w = rng.normal(0, 0.05, size=(7, 70)).astype(np.float32)
    # Q8: half a step; Q4: a whole step at most (+8 steps clip to nibble 15 = +7)
    for dtype, levels, steps in ((Q8, 127, 0.5), (Q4, 8, 1.0)):
        data = quantize(dtype, w)
        assert len(data) == matrix_bytes(dtype, 7, 70)
        back = dequantize(dtype, data, w.shape)
        assert back.shape == w.shape and back.dtype == np.float32
        blocks = np.pad(np.abs(w), ((0, 0), (0, 26))).reshape(7, 3, 32).max(axis=2)
        step = np.repeat(blocks / levels, 32, axis=1)[:, :70]
        assert np.all(np.abs(back - w) <= step * steps * 1.01 + 1e-6)  # (+ fp16 rounding of d)


def test_zero_blocks_and_bad_input():
    data = quantize(Q8, np.zeros((2, 32), dtype=np.float32))
    assert data == (_half(0.0) + bytes(32)) * 2
    data4 = quantize(Q4, np.zeros((1, 32), dtype=np.float32))
    assert data4 == _half(0.0) + bytes([0x88] * 16)
    with pytest.raises(OptionError, match="not all finite"):
        quantize(Q8, np.array([[np.nan] * 32], dtype=np.float32))
    with pytest.raises(OptionError, match="binary16"):
        quantize(Q8, np.array([[1e10] * 32], dtype=np.float32))
    with pytest.raises(OptionError, match="only matrices"):
        quantize(Q8, np.zeros(32, dtype=np.float32))


def test_first_bad_scale_finds_inf_and_nan():
    data = bytearray(quantize(Q8, np.ones((3, 32), dtype=np.float32)))
    raw = np.frombuffer(bytes(data), dtype=np.uint8)
    assert first_bad_scale(Q8, raw) is None
    data[2 * 34:2 * 34 + 2] = _half(float("inf"))
    assert first_bad_scale(Q8, np.frombuffer(bytes(data), dtype=np.uint8)) == 68
    data[34:36] = b"\x00\x7e"  # NaN
    assert first_bad_scale(Q8, np.frombuffer(bytes(data), dtype=np.uint8)) == 34
    assert first_bad_scale(0, raw) is None


def test_convert_quantizes_the_roles_asked_for(hf_checkpoint, tmp_path):
    from colibri_tools.converter.convert import main
    from colibri_tools.image.image_format import Role, read_image

    hf = hf_checkpoint("qwen2_moe")
    ffn = {Role.EXPERT_GATE, Role.EXPERT_UP, Role.EXPERT_DOWN, Role.SHARED_GATE, Role.SHARED_UP,
           Role.SHARED_DOWN, Role.DENSE_GATE, Role.DENSE_UP, Role.DENSE_DOWN}
    attention = {Role.ATTN_Q, Role.ATTN_K, Role.ATTN_V, Role.ATTN_O}
    embeddings = {Role.TOKEN_EMBED, Role.LM_HEAD}
    kv = {Role.ATTN_K, Role.ATTN_V}  # Q8 under int4 (with the LM head)
    for args, quantized, dtype, q8 in (
            (["--quant", "int8"], ffn, Q8, set()),
            (["--quant", "int4", "--quant-attention"], ffn | attention - kv, Q4, kv),
            (["--quant", "int8", "--quant-embeddings"], ffn | embeddings, Q8, set())):
        out = tmp_path / "_".join(args)
        assert main([str(hf), "-o", str(out), "--quiet", "--no-row-groups", *args]) == 0
        image = read_image(out / "model.bin", verify_data=True)
        assert image.header["version_minor"] == 3
        assert {t.role for t in image.tensors if t.dtype == dtype} == quantized
        if dtype == Q4:
            assert {t.role for t in image.tensors if t.dtype == Q8} == q8
        assert all(t.dtype in (0, dtype) or t.role in q8 for t in image.tensors)
        assert "#define COLIBRI_MODEL_QUANTIZED" in (out / "model_config.h").read_text()
    assert main([str(hf), "-o", str(tmp_path / "x"), "--quiet", "--quant-attention"]) == 1
    assert main([str(hf), "-o", str(tmp_path / "x"), "--quiet", "--quant-embeddings"]) == 1
    assert main([str(hf), "-o", str(tmp_path / "x"), "--quiet", "--row-groups"]) == 1
    assert not (tmp_path / "x").exists()


def test_convert_groups_rows_by_default_when_quantized(hf_checkpoint, tmp_path):
    """Without --no-row-groups every quantized matrix but the token embedding
    is stored in groups of 16 rows (format 1.8); float32 stays float32."""
    from colibri_tools.converter.convert import main
    from colibri_tools.image.image_format import Role, read_image

    hf = hf_checkpoint("qwen2_moe")
    out = tmp_path / "int4"
    assert main([str(hf), "-o", str(out), "--quiet", "--quant", "int4", "--quant-attention",
                 "--quant-embeddings"]) == 0
    image = read_image(out / "model.bin", verify_data=True)
    assert image.header["version_minor"] == 8
    grouped = {t.role for t in image.tensors if t.dtype in (Q8_R16, Q4_R16)}
    assert grouped and Role.TOKEN_EMBED not in grouped
    assert {t.dtype for t in image.tensors if t.role == Role.TOKEN_EMBED} == {Q4}
    assert all(t.dtype in (0, Q8_R16, Q4_R16) for t in image.tensors
               if t.role != Role.TOKEN_EMBED)
    assert main([str(hf), "-o", str(tmp_path / "f32"), "--quiet"]) == 0
    assert {t.dtype for t in read_image(tmp_path / "f32" / "model.bin").tensors} == {0}


def test_row_group_layout_by_hand():
    """Q8_R16 / Q4_R16 (docs/format.md 3.4) from the row-by-row blocks: tile
    (group, block) = the 16 scales, then chunk k with row i's 4 bytes at
    32 + 64k + 4i; a last group of 3 rows padded with zero rows."""
    rng = np.random.default_rng(5)
    w = rng.normal(0, 0.1, size=(19, 40)).astype(np.float32)
    for plain, grouped, width, zero in ((Q8, Q8_R16, 34, 0x00), (Q4, Q4_R16, 18, 0x88)):
        rows = np.frombuffer(quantize(plain, w), dtype=np.uint8).reshape(19, 2, width)
        data = quantize(grouped, w)
        assert len(data) == matrix_bytes(grouped, 19, 40) == 2 * 16 * 2 * width
        tile = 16 * width
        for r in range(32):
            for b in range(2):
                at = ((r // 16) * 2 + b) * tile
                i = r % 16
                scale = data[at + 2 * i:at + 2 * i + 2]
                values = bytes(data[at + 32 + 64 * k + 4 * i + j]
                               for k in range((width - 2) // 4) for j in range(4))
                if r < 19:
                    assert scale + values == rows[r, b].tobytes(), (r, b)
                else:
                    assert scale == bytes(2) and values == bytes([zero]) * (width - 2)
        assert np.array_equal(dequantize(grouped, data, w.shape), dequantize(plain, quantize(plain, w),
                                                                            w.shape))
        bad = bytearray(data)
        bad[tile + 2 * 7 + 1] = 0x7C  # block 1 of row 7: +infinity
        assert first_bad_scale(grouped, np.frombuffer(bytes(bad), dtype=np.uint8)) == tile + 14


def test_convert_row_groups(hf_checkpoint, tmp_path):
    """--row-groups: every quantized matrix but the token embedding in groups
    of 16 rows, format 1.8; only with --quant."""
    from colibri_tools.converter.convert import main
    from colibri_tools.image.image_format import Role, read_image

    hf = hf_checkpoint("qwen2_moe")
    out = tmp_path / "r16"
    assert main([str(hf), "-o", str(out), "--quiet", "--quant", "int4", "--quant-attention",
                 "--quant-embeddings", "--row-groups"]) == 0
    image = read_image(out / "model.bin", verify_data=True)
    assert image.header["version_minor"] == 8
    dtypes = {t.role: t.dtype for t in image.tensors}
    assert dtypes[Role.TOKEN_EMBED] == Q4 and dtypes[Role.ATTN_K] == Q8_R16
    assert dtypes[Role.LM_HEAD] == Q8_R16 and dtypes[Role.EXPERT_DOWN] == Q4_R16
    assert {t.dtype for t in image.tensors} == {0, Q4, Q8_R16, Q4_R16}
    assert main([str(hf), "-o", str(tmp_path / "x"), "--quiet", "--row-groups"]) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("family, head", [("granitemoeshared", "LM_HEAD"),
                                           ("granitemoe", "TOKEN_EMBED")])
def test_int4_keeps_the_logits_matrix_in_q8(hf_checkpoint, tmp_path, family, head):
    """--quant int4 --quant-attention --quant-embeddings: the matrix the
    logits come from (the LM head; with tied embeddings the token embedding,
    which is then the head too), K and V are Q8, every other quantized
    matrix Q4."""
    from colibri_tools.converter.convert import main
    from colibri_tools.image.image_format import Role, read_image

    out = tmp_path / family
    assert main([str(hf_checkpoint(family)), "-o", str(out), "--quiet", "--quant", "int4",
                 "--quant-attention", "--quant-embeddings", "--no-row-groups"]) == 0
    image = read_image(out / "model.bin", verify_data=True)
    q8 = {t.role for t in image.tensors if t.dtype == Q8}
    assert q8 == {getattr(Role, head), Role.ATTN_K, Role.ATTN_V}
    assert Role.TOKEN_EMBED in {t.role for t in image.tensors if t.dtype in (Q8, Q4)}
    assert len([t for t in image.tensors if t.dtype == Q4]) > 10


def test_mixed_keeps_the_experts_a_text_uses_most_in_int8(tmp_path):
    """--quant mixed on the demo model (a trained Mixtral, 4 experts, top-2):
    per layer the experts transformers' own router sends the most calibration
    tokens to are Q8, the others Q4, the rest of the feed-forward Q8."""
    from pathlib import Path

    from colibri_tools.converter.convert import convert
    from colibri_tools.image.image_format import Role, read_image
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    demo = Path(__file__).resolve().parents[2] / "models" / "tiny_moe"
    text = ("Mr. Darcy walked to the window and said nothing for a while; then he turned, and "
            "with a look of some embarrassment asked whether Miss Bennet would walk with him in "
            "the garden before dinner, since the rain had stopped and the evening was fine.")
    (tmp_path / "cal.txt").write_text(text)
    result = convert(demo, tmp_path / "out", progress=False, quant="mixed",
                     calibration=tmp_path / "cal.txt", int8_share=0.5, row_groups=False)
    image = read_image(result.image_path, verify_data=True)
    ids = Tokenizer.from_file(str(demo / "tokenizer.json")).encode(text).ids
    model = AutoModelForCausalLM.from_pretrained(demo, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        routers = model(torch.tensor([ids]), output_router_logits=True).router_logits
    k = model.config.num_experts_per_tok
    for layer, logits in enumerate(routers):
        counts = np.bincount(logits.topk(k, dim=-1).indices.flatten().numpy(), minlength=4)
        order = sorted(range(4), key=lambda e: (-counts[e], e))
        q8 = {t.expert for t in image.tensors if t.layer == layer and t.role == Role.EXPERT_GATE
              and t.dtype == Q8}
        q4 = {t.expert for t in image.tensors if t.layer == layer and t.role == Role.EXPERT_GATE
              and t.dtype == Q4}
        assert len(q8) == 2 and q8 | q4 == {0, 1, 2, 3}
        if counts[order[1]] != counts[order[2]]:  # no tie at the boundary
            assert q8 == set(order[:2]), (layer, counts)
    from colibri_tools.image.quant import weights_name
    assert weights_name(image.tensors) == "mixed"
    with pytest.raises(OptionError, match="needs --calibration"):
        convert(demo, tmp_path / "x", progress=False, quant="mixed")
    with pytest.raises(OptionError, match="not int4"):
        convert(demo, tmp_path / "x", progress=False, quant="int4", calibration=tmp_path / "cal.txt")
    with pytest.raises(OptionError, match="not with --quant"):
        convert(demo, tmp_path / "x", progress=False, quant="int4", target_bpw=3.0)
