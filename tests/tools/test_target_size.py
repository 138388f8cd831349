"""colibri-convert --target-size SIZE (docs/quantization.md, Widths from a
target): the super-block widths chosen as for --target-bpw, so that model.bin
as written (every tensor, the tables, the alignment between them) takes at
most SIZE bytes, and within 1 % of it when the widths can reach it; a size
below the smallest such image is refused with that smallest size."""
from __future__ import annotations

import pytest
from colibri_tools.converter.convert import main
from colibri_tools.converter.quant_widths import parse_size
from colibri_tools.errors import OptionError
from colibri_tools.image.image_format import read_image

WIDE = dict(hidden_size=256, intermediate_size=256, moe_intermediate_size=256,
            shared_expert_intermediate_size=256, num_attention_heads=4)
COMMON = ["--quiet", "--quant-attention", "--quant-embeddings"]


@pytest.mark.parametrize("text, size", [("8G", 8 << 30), ("512M", 512 << 20),
                                        ("7.5GiB", int(7.5 * (1 << 30))), ("6000000", 6000000),
                                        ("64kB", 64 << 10), (" 2 t ", 2 << 40)])
def test_sizes_as_people_write_them(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "8 gigs", "-1", "1e9", "G", "0x100"])
def test_a_size_that_is_not_one_is_refused(text):
    with pytest.raises(OptionError, match="--target-size"):
        parse_size(text)


def _size(hf, out, *args) -> int:
    assert main([str(hf), "-o", str(out), *COMMON, *args]) == 0
    return (out / "model.bin").stat().st_size


def test_the_image_fits_the_size_and_comes_close(hf_checkpoint, tmp_path):
    """Targets 30 % and 70 % of the way from the qk2 image to the qk6 one,
    row by row and (the expert blocks aligned after the rest) experts last."""
    hf = hf_checkpoint("qwen2_moe", **WIDE)
    for share, extra in ((0.3, []), (0.7, ["--experts-last"])):
        low = _size(hf, tmp_path / f"qk2{share}", "--quant", "qk2", *extra)
        high = _size(hf, tmp_path / f"qk6{share}", "--quant", "qk6", *extra)
        target = int(low + share * (high - low))
        got = _size(hf, tmp_path / f"t{share}", "--target-size", str(target), *extra)
        assert 0.99 * target <= got <= target, (target, got)
        image = read_image(tmp_path / f"t{share}" / "model.bin", verify_data=True)
        assert len({t.dtype for t in image.tensors if 10 <= t.dtype <= 14}) >= 2  # mixed widths
    assert _size(hf, tmp_path / "at_least", "--target-size", str(low), *extra) == low


def test_a_size_below_the_smallest_image_is_refused(hf_checkpoint, tmp_path, capsys):
    hf = hf_checkpoint("qwen2_moe", **WIDE)
    low = _size(hf, tmp_path / "qk2", "--quant", "qk2")
    capsys.readouterr()
    assert main([str(hf), "-o", str(tmp_path / "small"), *COMMON, "--target-size",
                 str(low - 1)]) == 1
    assert f"the image takes at least {low} bytes" in capsys.readouterr().err
    assert not (tmp_path / "small" / "model.bin").exists()


@pytest.mark.parametrize("args, message", [
    (["--target-size", "1G", "--target-bpw", "3"], "one target, not both"),
    (["--target-size", "1G", "--quant", "qk3"], "--target-size chooses the widths itself")])
def test_one_way_to_choose_the_widths(hf_checkpoint, tmp_path, capsys, args, message):
    hf = hf_checkpoint("qwen2_moe")
    assert main([str(hf), "-o", str(tmp_path / "out"), "--quiet", *args]) == 1
    assert message in capsys.readouterr().err
