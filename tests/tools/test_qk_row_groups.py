"""The super-blocks in groups of 16 rows, QK2_R16 .. QK6_R16 (format 1.16,
docs/format.md 3.6): the tiles against the spec's table written out here
byte by byte, the inverse, the zero padding rows, the scales colibri_verify
checks, and colibri-convert writing them by default (QK3 with
--no-row-groups) at the same bytes a weight."""
from __future__ import annotations

import numpy as np
import pytest
from colibri_tools.image.qk_row_groups import from_qk_row_groups, to_qk_row_groups
from colibri_tools.image.quant import (
    DTYPE_NAMES,
    allowed_dtypes,
    dequantize,
    first_bad_scale,
    matrix_bytes,
    quantize,
    weights_name,
)

QK2, QK3, QK6 = 5, 6, 9
QK2_R16, QK3_R16, QK6_R16 = 10, 11, 14
RNG = np.random.default_rng(11)


def _spec_tile_byte(i: int, p: int) -> int:
    """docs/format.md 3.6: the tile byte of byte p of row i's super-block."""
    if p < 2:
        return 2 * i + p
    if p < 4:
        return 32 + 2 * i + p - 2
    if p < 16:
        return 64 + 16 * (p - 4) + i
    u, t = divmod(p - 16, 4)
    return 256 + 64 * u + 4 * i + t


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6])
def test_tiles_follow_the_spec_table(bits):
    """19 rows of 2 super-blocks (arbitrary bytes: the layout moves bytes, it
    does not read them): two groups, the second padded with 13 zero rows."""
    width, rows, nsb = 16 + 32 * bits, 19, 2
    sb = RNG.integers(1, 256, size=(rows, nsb, width), dtype=np.uint8)
    data = to_qk_row_groups(bits + 8, sb)
    tile = 16 * width
    assert data.shape == (2 * nsb * tile,)
    seen = np.zeros(data.shape, dtype=bool)
    for r in range(32):
        g, i = divmod(r, 16)
        for s in range(nsb):
            base = (g * nsb + s) * tile  # group g's tile s
            for p in range(width):
                at = base + _spec_tile_byte(i, p)
                assert not seen[at], (r, s, p)
                seen[at] = True
                assert data[at] == (sb[r, s, p] if r < rows else 0), (r, s, p)
    assert seen.all()


@pytest.mark.parametrize("rows", [1, 16, 19, 33])
def test_inverse_gives_the_rows_back(rows):
    sb = RNG.integers(0, 256, size=(rows, 3, 16 + 32 * 5), dtype=np.uint8)
    data = to_qk_row_groups(13, sb)
    assert len(data) == -(-rows // 16) * 16 * 3 * (16 + 32 * 5)
    assert np.array_equal(from_qk_row_groups(13, data, rows, 3), sb)
    assert np.array_equal(from_qk_row_groups(13, data.tobytes(), rows, 3), sb)


@pytest.mark.parametrize("plain", [QK2, QK3, 7, 8, QK6])
def test_quantized_bytes_are_the_row_by_row_ones_regrouped(plain):
    """quantize(QKb_R16) holds exactly QKb's bytes, tiled; both read back as
    the same weights; a last group of 3 rows is padded with zero bytes."""
    grouped = plain + 5
    w = RNG.standard_normal((19, 300)).astype(np.float32) * 0.05
    rows_data = np.frombuffer(quantize(plain, w), dtype=np.uint8)
    data = np.frombuffer(quantize(grouped, w), dtype=np.uint8)
    width = 16 + 32 * (plain - 3)
    assert len(data) == matrix_bytes(grouped, 19, 300) == 32 * 2 * width
    assert sorted(data) == sorted(np.concatenate([rows_data, np.zeros(13 * 2 * width, np.uint8)]))
    tile = 16 * width
    for p in range(width):  # every padding row (16 + 3 .. 31) of the last group: 0
        for i in range(3, 16):
            assert data[2 * tile + _spec_tile_byte(i, p)] == 0
            assert data[3 * tile + _spec_tile_byte(i, p)] == 0
    np.testing.assert_array_equal(dequantize(grouped, data, w.shape),
                                  dequantize(plain, rows_data, w.shape))
    assert first_bad_scale(grouped, data) is None


def test_verify_finds_a_bad_dmin_in_a_padding_row():
    """colibri_verify reads the 32 binary16 at every tile's start (16 d,
    16 dmin), the padding rows' too; so does the Python reader."""
    w = RNG.standard_normal((19, 256)).astype(np.float32)
    data = bytearray(quantize(QK3_R16, w))
    tile = 16 * (16 + 32 * 3)
    at = tile + 32 + 2 * 15  # group 1 (rows 16 .. 18 and padding), dmin of row 31
    data[at:at + 2] = b"\x00\x7c"  # +infinity
    assert first_bad_scale(QK3_R16, np.frombuffer(bytes(data), np.uint8)) == at
    data[at:at + 2] = b"\x00\x00"
    data[2 * 5 + 1] = 0xFE  # d of row 5 in group 0: NaN
    assert first_bad_scale(QK3_R16, np.frombuffer(bytes(data), np.uint8)) == 10
    data[2 * 5 + 1] = 0
    data[64] = 0xFF  # a scale byte is not a binary16: no scale error
    assert first_bad_scale(QK3_R16, np.frombuffer(bytes(data), np.uint8)) is None


def test_names_and_roles():
    assert [DTYPE_NAMES[d] for d in range(10, 15)] == [f"QK{b}_R16" for b in range(2, 7)]
    assert QK3_R16 not in allowed_dtypes(1) and QK3_R16 in allowed_dtypes(48)  # embedding, gate
    assert 15 not in allowed_dtypes(48)


def test_bytes_a_weight_unchanged_when_rows_are_whole_groups():
    for bits in range(2, 7):
        assert 8 * matrix_bytes(bits + 8, 64, 512) / (64 * 512) == bits + 0.5
        assert matrix_bytes(bits + 8, 64, 512) == matrix_bytes(bits + 3, 64, 512)
        assert matrix_bytes(bits + 8, 65, 512) == matrix_bytes(bits + 3, 80, 512)


def test_convert_writes_qk_row_groups_by_default(hf_checkpoint, tmp_path):
    """--quant qk3: every super-block matrix QK3_R16 (K, V and the LM head
    QK6_R16), version_minor 16; --no-row-groups: QK3 and QK6, 1.15. The
    token embedding is Q8 either way, and both images hold the same weights."""
    from colibri_tools.converter.convert import main
    from colibri_tools.image.image_format import Role, read_image

    hf = hf_checkpoint("qwen2_moe")
    common = ["--quiet", "--quant", "qk3", "--quant-attention", "--quant-embeddings"]
    assert main([str(hf), "-o", str(tmp_path / "r16"), *common]) == 0
    assert main([str(hf), "-o", str(tmp_path / "rows"), *common, "--no-row-groups"]) == 0
    grouped = read_image(tmp_path / "r16" / "model.bin", verify_data=True)
    rows = read_image(tmp_path / "rows" / "model.bin", verify_data=True)
    assert grouped.header["version_minor"] == 16 and rows.header["version_minor"] == 15
    dtypes = {t.role: t.dtype for t in grouped.tensors}
    assert dtypes[Role.EXPERT_GATE] == QK3_R16 and dtypes[Role.ATTN_K] == QK6_R16
    assert dtypes[Role.LM_HEAD] == QK6_R16 and dtypes[Role.TOKEN_EMBED] == 1  # Q8
    assert {t.dtype for t in grouped.tensors} == {0, 1, QK3_R16, QK6_R16}
    assert {t.dtype for t in rows.tensors} == {0, 1, QK3, QK6}
    assert weights_name(grouped.tensors) == weights_name(rows.tensors) == "mixed"
    for g, r in zip(grouped.tensors, rows.tensors):
        assert g.dtype == (r.dtype + 5 if r.dtype in (QK3, QK6) else r.dtype)
        assert g.size == matrix_bytes(g.dtype, *g.shape) if g.dtype else True
        if g.dtype in (QK3_R16, QK6_R16) and g.shape[0] % 16 == 0:
            assert g.size == r.size  # whole groups: the same bytes a weight
        np.testing.assert_array_equal(grouped.tensor_array(g), rows.tensor_array(r))


def test_width_costs_count_the_padding_rows():
    """--target-bpw's costs are the bytes as written: with row groups a
    matrix of 19 rows takes 32 rows at every width."""
    from colibri_tools.converter.quant_widths import width_cost
    from colibri_tools.image.image_spec import TensorEntry
    from colibri_tools.image.image_writer import SourceTensor

    w = RNG.standard_normal((19, 256)).astype(np.float32)
    source = SourceTensor(TensorEntry(48, 0, 0, (19, 256), QK3), lambda: w)
    assert width_cost(source).bytes == tuple(19 * (16 + 32 * b) for b in range(2, 7))
    assert width_cost(source, row_groups=True).bytes == tuple(32 * (16 + 32 * b)
                                                              for b in range(2, 7))


WIDE = dict(hidden_size=256, intermediate_size=256, moe_intermediate_size=256,
            shared_expert_intermediate_size=256, num_attention_heads=4)


@pytest.mark.parametrize("target", [2.75, 4.2])
def test_target_bpw_is_met_as_stored(hf_checkpoint, tmp_path, target):
    """--target-bpw with the LM head (101 rows: 11 padding rows, QK6_R16):
    the chosen widths are written in groups of 16 rows, and the target holds
    for the bytes as stored, padding included, within 1 % below."""
    from colibri_tools.converter.convert import main
    from colibri_tools.image.image_format import read_image

    hf = hf_checkpoint("qwen2_moe", **WIDE)
    out = tmp_path / "bpw"
    assert main([str(hf), "-o", str(out), "--quiet", "--target-bpw", str(target),
                 "--quant-embeddings"]) == 0
    image = read_image(out / "model.bin", verify_data=True)
    chosen = [t for t in image.tensors if 10 <= t.dtype <= 14]
    assert image.header["version_minor"] == 16
    assert {t.dtype for t in image.tensors} - {0, 1} == {t.dtype for t in chosen}  # embedding Q8
    assert any(t.shape[0] % 16 for t in chosen)  # a padded matrix is counted
    bits = 8 * sum(t.size for t in chosen) / sum(int(np.prod(t.shape)) for t in chosen)
    assert 0.99 * target <= bits <= target, bits
