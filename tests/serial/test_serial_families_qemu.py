"""Every issue-11 family on an emulated board (issue 11, "the families run on at
least one QEMU board through the serial runner"): a tiny random-weight model of
the family (tests/hf_models.py, its distinctive features on: Granite's
multipliers, PhiMoE's LayerNorm and sparsemixer, ERNIE's layer pattern and
biased router, GLM/dots1's sigmoid groups and partial RoPE, gpt-oss's sinks and
sliding window, DeepSeek's Multi-head Latent Attention), converted, built into
the bare-metal serial_runner for QEMU's virt Cortex-A72 (NEON kernels) and run
over the serial protocol against a golden suite transformers computes: greedy
tokens identical and logits within the suite runner's tolerance. Every step is
bounded: the firmware build by a subprocess timeout, QEMU by the session's, each
request by the client's."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from colibri_tools.protocol import SerialClient
from colibri_tools.testing.golden import make_suite, random_cases
from colibri_tools.testing.suite_runner import run_suite
from serial_helpers import REPO

BOARD = "qemu_virt_a72"
TOOLS = ("qemu-system-aarch64", "aarch64-linux-gnu-gcc")
# The issue-11 families tests/hf_models.py builds (their default configs, and the
# named YaRN variants), and FlexOlmo, Hunyuan-MoE, GLM-4.7-Flash, MiniMax-M2, EXAONE MoE,
# DBRX, AFMoE, Llama 4, JetMoE, LongCat-Flash and MiMo-V2-Flash (issue 29), LFM2-MoE
# (issue 28: short convolution layers), Granite-4.0-H and Qwen3-Next (issue 28: Mamba2 and
# gated delta layers).
FAMILIES = ("granitemoe", "granitemoeshared", "phimoe", "ernie4_5_moe", "glm4_moe", "dots1",
            "gpt_oss", "glm4_moe_yarn", "gpt_oss_yarn", "deepseek_v2", "deepseek_v3",
            "deepseek_v3_yarn", "deepseek_v2_greedy", "flex_olmo", "hunyuan_v1_moe", "glm4_moe_lite",
            "minimax_m2", "exaone_moe", "dbrx", "afmoe", "llama4_text", "jetmoe", "longcat_flash",
            "mimo_v2_flash", "lfm2_moe", "granitemoehybrid", "qwen3_next", "qwen3_5_moe",
            "kimi_linear", "bailing_hybrid", "jamba", "nemotron_h")
BUILD_SECONDS = 600
QEMU_SECONDS = 180


def _converted(family: str, root):
    from colibri_tools.converter.convert import convert
    from hf_models import VARIANTS, build_model, save_checkpoint

    base, overrides = VARIANTS.get(family, (family, {}))
    model, _ = build_model(base, seed=11, **overrides)
    save_checkpoint(model, root / "hf")
    convert(root / "hf", root / "out", context=64, progress=False)
    return model.config.vocab_size, root / "hf", root / "out"


def _firmware(model_dir, build_dir, board=BOARD):
    done = subprocess.run(["make", "-s", "firmware", f"BUILD={build_dir}", f"BOARD={board}",
                           "APP=serial_runner", f"MODEL_DIR={model_dir}"], cwd=REPO,
                          capture_output=True, text=True, timeout=BUILD_SECONDS)
    assert done.returncode == 0, done.stderr[-3000:]
    return build_dir / "fw" / board / "serial_runner" / "firmware.elf"


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """One BUILD folder for every family: each recompiles only the runner's
    main.c (ports/baremetal/firmware.mk), and boots before the next build."""
    return tmp_path_factory.mktemp("fw")


@pytest.mark.parametrize("family", FAMILIES)
def test_family_passes_its_golden_suite_on_the_board(family, tmp_path, build):
    for tool in TOOLS:
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (scripts/setup.sh installs it)")
    from colibri_tools.board.qemu import launch

    vocab, hf_dir, out = _converted(family, tmp_path)
    # Prompts of 1, 7 and 33 tokens and 8 greedy ones each: past gpt-oss's window
    # of 8 and the 16-position original context of the YaRN variants.
    cases = random_cases(vocab, lengths=(1, 7, 33), gen=8, seed=4)
    suite = make_suite(hf_dir, cases, image=out / "model.bin")
    elf = _firmware(out, build)
    with launch(BOARD, elf, out / "model.bin", timeout=QEMU_SECONDS) as session:
        with SerialClient.from_port(session.open_serial(), session.url, timeout=60) as client:
            report = run_suite(client, suite)
    assert report.info.board == BOARD
    assert report.passed, [(c.name, c.messages) for c in report.cases]
    assert len(report.cases) == len(cases)


def test_a_hybrid_family_runs_on_a_cortex_m_board(tmp_path):
    """LFM2-MoE (issue 28) on the emulated Cortex-M55 (mps3-an547, Helium): its
    short convolution layers keep their last inputs in the state, which the
    runner holds in static memory (kv_memory[COLIBRI_MODEL_STATE_BYTES]) of the
    size model_config.h states: the attention layers' KV cache and two copies of
    each convolution layer's rows, nothing that grows for the others. The golden
    suite transformers computes passes over serial, prompts of 1, 7 and 33 tokens."""
    for tool in ("qemu-system-arm", "arm-none-eabi-gcc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (scripts/setup.sh installs it)")
    from colibri_tools import read_image
    from colibri_tools.board.qemu import launch
    from colibri_tools.image.sizes import state_size

    vocab, hf_dir, out = _converted("lfm2_moe", tmp_path)
    image = read_image(out / "model.bin")
    r, conv = image.record, image.conv_layers
    want = 4 * (2 * (r.n_layers - conv) * 64 * r.n_kv_heads * r.head_dim
                + 2 * conv * (r.conv_kernel - 1) * r.hidden_size)  # docs/core.md, at context 64
    assert conv == 3 and state_size(r, 64, conv) == want
    header = (out / "model_config.h").read_text()
    assert re.search(rf"#define COLIBRI_MODEL_STATE_BYTES +{want}u\n", header)
    cases = random_cases(vocab, lengths=(1, 7, 33), gen=8, seed=4)
    suite = make_suite(hf_dir, cases, image=out / "model.bin")
    elf = _firmware(out, tmp_path / "build", "qemu_an547")
    with launch("qemu_an547", elf, out / "model.bin", timeout=QEMU_SECONDS) as session:
        with SerialClient.from_port(session.open_serial(), session.url, timeout=60) as client:
            report = run_suite(client, suite)
    assert report.info.board == "qemu_an547"
    assert report.passed, [(c.name, c.messages) for c in report.cases]
