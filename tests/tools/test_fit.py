"""The planner (colibri-board fit, issue 12): its sizes are the ones the
converter writes and the linker finds, its verdict is the one colibri-convert
--board and make firmware give, and its report has every part the issue asks
for. Expected numbers come from converted images, GNU ld's link of real
firmware and arithmetic written out here, not from the planner itself."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from board_files import write_board
from colibri_tools.board import boards
from colibri_tools.board.boards import BoardError, load
from colibri_tools.board.fit import FIRMWARE_STATIC, load_model, plan, refusal
from colibri_tools.converter.convert import convert
from colibri_tools.errors import CheckpointError, OptionError
from colibri_tools.image import sizes
from colibri_tools.image.image_reader import read_image

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "models" / "tiny_moe"
BOARD = REPO / ".venv" / "bin" / "colibri-board"


def _fit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BOARD), "fit", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe", "qwen3_moe", "granitemoeshared",
                                    "longcat_flash"])
def test_sizes_from_config_equal_the_converted_image(family, hf_checkpoint, tmp_path):
    hf = hf_checkpoint(family)
    result = convert(hf, tmp_path / "out", progress=False, alignment=1024)
    image = read_image(result.image_path)
    facts = load_model(hf / "config.json", alignment=1024)
    assert facts.image_bytes == image.image_size == result.image_path.stat().st_size
    # bytes per token, written out: all weights but the routed experts and the
    # embedding table, plus top_k/n_experts of the experts and one embedding row
    # (LongCat: top_k/(n_experts + zero_experts), the zero experts reading nothing)
    r = image.record
    routed = sum(t.size for t in image.tensors if t.expert != 0xFFFF)  # docs/format.md: NO_EXPERT
    embed = image.tensors[0].size
    rest = sum(t.size for t in image.tensors) - routed - (0 if r.tie_embeddings else embed)
    want = rest + 4 * r.hidden_size + (routed * r.top_k // (r.n_experts + r.zero_experts) if r.n_experts
                                         else 0)
    assert facts.bytes_per_token == want
    assert load_model(result.image_path.parent).bytes_per_token == want


@pytest.mark.parametrize("family,quant", [("qwen2_moe", "int8"), ("mixtral", "int4"),
                                          ("granitemoeshared", "int8")])
def test_quantized_sizes_agree(family, quant, hf_checkpoint, tmp_path):
    """The planner (load_model, colibri-board fit --quant) and colibri-convert
    --quant give the same image size (both in groups of 16 rows, the default)
    and scratch, the one quantized images need."""
    hf = hf_checkpoint(family)
    result = convert(hf, tmp_path / "out", progress=False, quant=quant, context=32)
    image = read_image(result.image_path, verify_data=True)
    assert image.header["version_minor"] == 8 and image.quantized  # in groups of 16 rows
    facts = load_model(hf / "config.json", quant=quant)
    assert facts.image_bytes == image.image_size == result.image_path.stat().st_size
    assert load_model(result.image_path.parent).weights == quant
    done = _fit("rpi4", str(hf), "--quant", quant, "--context", "32", "--json")
    assert done.returncode in (0, 1), done.stderr
    data = json.loads(done.stdout)
    assert data["image_bytes"] == image.image_size
    assert data["ram"]["scratch"] == result.scratch_bytes == sizes.scratch_size(
        image.record, 32, 1, quantized=True) > sizes.scratch_size(image.record, 32)


def test_quantized_experts_follow_the_rule():
    """Q8: 32 int8 + a binary16 scale per block of 32 (34 bytes), Q4: 16 + 2
    (docs/format.md 3.3), rows padded to whole blocks."""
    from colibri_tools.image.quant import matrix_bytes
    assert matrix_bytes(1, 3, 70) == 3 * 3 * 34
    assert matrix_bytes(2, 2, 64) == 2 * 2 * 18
    fp32, int8, int4 = (load_model(DEMO, quant=q) for q in (None, "int8", "int4"))
    # the demo model: 4 layers x 4 experts x (gate, up: 192 x 128; down: 128 x 192);
    # only the experts change size, each block of 4 KiB-aligned experts shrinks
    def experts(per_block: int) -> int:
        return 4 * 4 * (2 * 192 * (128 // 32) * per_block + 128 * (192 // 32) * per_block)
    saved = 4 * 4 * 3 * 192 * 128 * 4 - experts(34)
    assert abs((fp32.image_bytes - int8.image_bytes) - saved) < 4 * 4 * 4096
    assert int4.image_bytes < int8.image_bytes < fp32.image_bytes
    assert int8.weights == "int8"
    assert int8.bytes_per_token < fp32.bytes_per_token
    with pytest.raises(OptionError, match="already stored"):
        load_model(REPO / "models" / "tiny_moe" / "model.safetensors", quant="int8")


@pytest.fixture(scope="module")
def demo_256(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fit_demo") / "demo"
    convert(DEMO, out, progress=False)
    return out


def _link(board: str, model_dir: Path, build: Path, app: str = "serial_runner"):
    return subprocess.run(["make", "-s", "firmware", f"BUILD={build}", f"BOARD={board}",
                           f"APP={app}", f"MODEL_DIR={model_dir}"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def _ram_used(elf: Path, board) -> int:
    nm = f"{board.cross_prefix}nm"
    out = subprocess.run([nm, str(elf)], capture_output=True, text=True, check=True).stdout
    end = next(int(line.split()[0], 16) for line in out.splitlines()
               if line.endswith(" __ram_used_end"))
    return end - board.ram.origin


def test_largest_context_is_where_the_linker_agrees(demo_256, tmp_path):
    """The issue's case: the demo model at context 256 does not fit the
    STM32H747I-DISCO's 512 KiB. The planner names the largest context; the
    firmware links there, and make firmware refuses one more, before compiling."""
    board = load("stm32h747i_disco")
    report = plan(board, load_model(demo_256))
    assert report.context == 256 and not report.fits and report.ram_fits is False
    best = report.largest_context
    assert 200 < best < 256
    fits_dir, over_dir = tmp_path / "fits", tmp_path / "over"
    convert(DEMO, fits_dir, context=best, progress=False)
    convert(DEMO, over_dir, context=best + 1, progress=False)
    done = _link("stm32h747i_disco", fits_dir, tmp_path / "build")
    assert done.returncode == 0, done.stderr[-2000:]
    elf = tmp_path / "build" / "fw" / "stm32h747i_disco" / "serial_runner" / "firmware.elf"
    used = _ram_used(elf, board)
    assert used <= board.ram.length
    # what the planner counts beside the model buffers covers what the link used
    facts = load_model(fits_dir)
    r = facts.record
    model_bytes = (sizes.state_size(r, best) + sizes.scratch_size(r, best) + sizes.logits_size(r))
    static = used - model_bytes - sum(board.stacks.values())
    estimate = FIRMWARE_STATIC["baremetal-cortex-m"]["serial_runner"]
    assert static <= estimate <= static + 2048
    refused = _link("stm32h747i_disco", over_dir, tmp_path / "build2")
    assert refused.returncode != 0
    assert "do not fit stm32h747i_disco" in refused.stderr
    assert f"largest context that fits is {best}" in refused.stderr
    assert not (tmp_path / "build2" / "fw" / "stm32h747i_disco" / "serial_runner" / "obj").exists()


def test_paged_cache_is_what_the_linker_agrees(tmp_path):
    """paged_moe (routed experts paged from storage) on the STM32H747I-DISCO's
    512 KiB: the demo model in int4 with its experts last, whose 16 expert
    blocks do not all fit beside the image's start. make firmware compiles in
    the planner's cache (colibri-board fit --cache-slots); the link's RAM is
    within the planner's total, and one slot more would not fit the RAM."""
    board = load("stm32h747i_disco")
    model_dir = tmp_path / "model"
    convert(DEMO, model_dir, context=32, progress=False, quant="int4", quant_attention=True,
            quant_embeddings=True, experts_last=True)
    report = plan(board, load_model(model_dir), app="paged_moe")
    paged = report.paged
    assert report.fits and 2 <= paged["slots"] < paged["blocks"] == 16
    done = _link("stm32h747i_disco", model_dir, tmp_path / "build", app="paged_moe")
    assert done.returncode == 0, done.stderr[-2000:]
    elf = tmp_path / "build" / "fw" / "stm32h747i_disco" / "paged_moe" / "firmware.elf"
    used = _ram_used(elf, board)
    assert used <= report.ram["total"] <= board.ram.length
    assert report.ram["total"] - used <= 2048  # the planner's static estimate is close
    assert report.ram["total"] + 16 + paged["slot_bytes"] > board.ram.length
    facts = load_model(model_dir)
    assert facts.resident_bytes == read_image(model_dir / "model.bin").resident_size
    not_last = tmp_path / "not_last"
    convert(DEMO, not_last, context=32, progress=False, quant="int4")
    refused = plan(board, load_model(not_last), app="paged_moe")
    assert not refused.fits and "--experts-last" in refusal(refused)


def test_convert_board_refuses_before_writing(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(OptionError) as err:
        convert(DEMO, out, progress=False, board="stm32h747i_disco")
    assert not out.exists()
    report = plan(load("stm32h747i_disco"), load_model(DEMO, alignment=4096), context=256)
    assert str(err.value) == f"--board stm32h747i_disco: {refusal(report)}"
    too_small = write_board(tmp_path, "tiny_flash", size=0x100000)
    with pytest.raises(OptionError, match="model image is .* holds 1048576 bytes"):
        convert(DEMO, out, progress=False, board=too_small, context=8)


def test_fit_command_report_json_and_exit_status(demo_256):
    done = _fit("stm32h747i_disco", str(demo_256))
    assert done.returncode == 1, done.stderr
    for words in ("weight region", "KV state", "scratch", "stacks", "firmware",
                  "largest context that fits", "at 0x90000000", "at 0x24000000",
                  "tokens/s", "DOES NOT FIT"):
        assert words in done.stdout, words
    good = _fit("stm32h747i_disco", str(demo_256), "--context", "64", "--json")
    assert good.returncode == 0, good.stderr
    data = json.loads(good.stdout)
    r = read_image(demo_256 / "model.bin").record
    assert data["fits"] and data["context"] == 64
    assert data["ram"]["kv_state"] == 2 * r.n_layers * 64 * r.n_kv_heads * r.head_dim * 4
    assert data["ram"]["stacks"] == 0x4000 + 0x2000
    assert data["image_bytes"] == (demo_256 / "model.bin").stat().st_size
    assert data["tokens_per_s"] == pytest.approx(64e6 / data["bytes_per_token"])
    quiet = _fit("stm32h747i_disco", str(demo_256), "--context", "64", "--check")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    bad = _fit("no_such_board", str(demo_256))
    assert bad.returncode == 2 and "no board 'no_such_board'" in bad.stderr


def test_every_board_answers_for_the_demo_model():
    for name in boards.board_names():
        done = _fit(name, str(DEMO), "--context", "64")
        assert done.returncode in (0, 1), done.stderr
        assert "weights read per token" in done.stdout
        linux = load(name).port == "linux"
        assert ("mapped and resident" in done.stdout) == linux


def test_hf_cache_root_is_found(hf_checkpoint, tmp_path):
    src = hf_checkpoint("mixtral")
    root = tmp_path / "models--org--tiny"
    snap = root / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    for f in src.iterdir():
        (snap / f.name).symlink_to(f)
    result = convert(root, tmp_path / "out", progress=False)
    assert result.image_path.is_file()
    assert load_model(root).image_bytes == result.image_size
    (root / "snapshots" / "fedc9876").mkdir()
    (root / "snapshots" / "fedc9876" / "config.json").symlink_to(src / "config.json")
    with pytest.raises(CheckpointError, match="several snapshots and no refs/main"):
        convert(root, tmp_path / "out2", progress=False)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text("0123abcd")
    assert convert(root, tmp_path / "out3", progress=False).image_size == result.image_size


def test_make_firmware_needs_a_model(tmp_path):
    for extra, words in (([], "make firmware needs MODEL_DIR"),
                         ([f"MODEL_DIR={tmp_path}/none"], "has no model_config.h")):
        done = subprocess.run(["make", "-s", "firmware", f"BUILD={tmp_path}/b", "BOARD=qemu_an547",
                               *extra], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and words in done.stderr, done.stderr
        assert "Nothing to be done" not in done.stdout + done.stderr


def test_board_list_and_show_are_readable():
    listing = subprocess.run([str(BOARD), "list"], capture_output=True, text=True, timeout=60).stdout
    assert "512 KiB" in listing.splitlines()[[n.split()[0] for n in listing.splitlines()]
                                             .index("stm32h747i_disco")]
    shown = subprocess.run([str(BOARD), "show", "stm32h747i_disco"], capture_output=True,
                           text=True, timeout=60).stdout
    assert "0x90000000 .. 0x98000000" in shown and "base = 0x40011000" in shown
    assert "Board(" not in shown and "Region(" not in shown
    assert "bandwidth" in shown and "RM0399" in shown


def test_board_file_bandwidth_and_stacks_are_checked(tmp_path):
    path = write_board(tmp_path, "bw", extra="bandwidth = 1e9\n")
    with pytest.raises(BoardError, match="bandwidth needs bandwidth_source"):
        load(path)
    path = write_board(tmp_path, "bw2", extra="[stacks]\nmain = 4096\n")
    with pytest.raises(BoardError, match="unknown key.*main.*thread, handler"):
        load(path)
    path = write_board(tmp_path, "bw3", extra="[stacks]\nthread = 0x1000\n")
    board = load(path)
    assert board.stacks == {"thread": 0x1000, "handler": 0x2000}
    assert "__cm_thread_stack_size = 0x1000;" in boards.linker_memory(board)


def _recurrent_state_growth(hf, tmp_path):
    """Converts a checkpoint with 3 recurrent layers, checks fit counts them from the
    config as from the image, and returns its record and the state's growth a position."""
    result = convert(hf, tmp_path / "out", progress=False)
    from_config, from_image = load_model(hf / "config.json"), load_model(result.image_path)
    assert from_config.conv_layers == from_image.conv_layers == 3
    r = from_image.record
    return r, sizes.state_size(r, 33, 3) - sizes.state_size(r, 32, 3)


def test_short_convolution_layers_need_no_kv_cache(hf_checkpoint, tmp_path):
    """LFM2-MoE (format 1.13): fit counts its 3 convolution layers from the config
    as from the image, and the state it budgets grows per position by the K and V
    of the 2 attention layers only."""
    hf = hf_checkpoint("lfm2_moe")
    r, growth = _recurrent_state_growth(hf, tmp_path)
    assert growth == 2 * 2 * r.n_kv_heads * r.head_dim * 4
    assert sizes.state_size(r, 1, 3) - growth == 2 * 3 * (r.conv_kernel - 1) * r.hidden_size * 4


def test_mamba2_layers_need_no_kv_cache(hf_checkpoint, tmp_path):
    """Granite-4.0-H (format 1.14): fit counts its 3 Mamba2 layers from the config as
    from the image; each keeps two copies of its 3 convolution rows over x, B and C
    (64 + 2 * 2 * 8 channels) and its state (64 channels of 8), whatever the context,
    and only the 2 attention layers grow with it. A config whose layers are all Mamba2
    budgets no KV cache at all: the state is the same at 1 and at 64 positions."""
    hf = hf_checkpoint("granitemoehybrid")
    r, growth = _recurrent_state_growth(hf, tmp_path)
    assert growth == 2 * 2 * r.n_kv_heads * r.head_dim * 4
    assert sizes.state_size(r, 1, 3) - growth == 2 * 3 * (3 * 96 + 64 * 8) * 4
    config = json.loads((hf / "config.json").read_text())
    config["layer_types"] = ["linear_attention"] * config["num_hidden_layers"]
    (tmp_path / "all.json").write_text(json.dumps(config))
    every = load_model(tmp_path / "all.json")
    assert every.conv_layers == 5
    assert sizes.state_size(every.record, 1, 5) == sizes.state_size(every.record, 64, 5) == \
        2 * 5 * (3 * 96 + 64 * 8) * 4
