"""Quantized images on the Cortex-M QEMU boards: the self-test firmware
(samples/baremetal/board_selftest_m) with a tiny Mixtral converted --quant
int8 and int4 (attention too) runs on mps3-an547 (Cortex-M55: the Helium
table's matmat_q8/q4) and mps2-an500 (Cortex-M7: the reference's), and its
logits and greedy tokens equal the x86-64 build's (avx512vnni/avx2 there),
bit for bit: the quantized products' contract across ISAs, end to end."""
from __future__ import annotations

import pytest
from cm_helpers import (
    N_GEN,
    N_IDS,
    QEMU_BOARDS,
    build_firmware,
    host_reference,
    run_qemu,
    selftest_lines,
    selftest_logits,
)


@pytest.fixture(scope="module", params=["int8", "int4"])
def quant_model(request, tmp_path_factory):
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    root = tmp_path_factory.mktemp(f"cm_q_{request.param}")
    model, _ = build_model("mixtral", seed=0)
    save_checkpoint(model, root / "hf")
    convert(root / "hf", root / "out", context=64, progress=False, quant=request.param,
            quant_attention=request.param == "int4")
    return request.param, root / "out", model.config.vocab_size


@pytest.mark.parametrize("board", QEMU_BOARDS)
def test_quantized_logits_bit_identical_to_x86_64(board, quant_model, need_qemu, colibri_run,
                                                  tmp_path):
    quant, model_dir, vocab = quant_model
    firmware = build_firmware(board, model_dir, tmp_path / "build")
    done = run_qemu(board, firmware.elf, model_dir / "model.bin")
    assert "SELFTEST PASS" in done.stdout, done.stdout[-2000:] + done.stderr
    reference, generated = host_reference(colibri_run, model_dir / "model.bin", vocab, tmp_path)
    logits = selftest_logits(done.stdout, vocab)
    assert logits.shape == (N_IDS, vocab)
    differing = int((logits.view("u4") != reference.view("u4")).sum())
    assert differing == 0, (quant, board, f"{differing} of {logits.size} logits differ")
    gen = [int(x) for x in selftest_lines(done.stdout)["gen"].split()[1:]]
    assert gen == generated[:N_GEN], (quant, board)
