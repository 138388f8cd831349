"""model_config.h is the compile-time twin of the image: a program built
with it gets static buffers of exactly the sizes the API reports, accepts
its own image and refuses another one by fingerprint."""
from __future__ import annotations

import pathlib
import re
import subprocess

import pytest
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]


def _build_sample(config_dir: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    subprocess.run(["make", "-s", "host"], cwd=REPO, check=True)
    exe = out / "static_buffers"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2",
                    "-Isdk/include", "-Iports/linux", f"-I{config_dir}",
                    "samples/linux/static_buffers.c",
                    *sorted(str(p.relative_to(REPO))
                            for p in (REPO / "ports" / "linux").glob("colibri_linux*.c")),
                    "build/host/libcolibri.a", "-o", str(exe)], cwd=REPO, check=True)
    return exe


def _macro(header: str, name: str) -> int:
    return int(re.search(rf"#define {name}\s+\(?(0x[0-9A-Fa-f]+|\d+)", header).group(1), 0)


@pytest.mark.parametrize("which", ["valid_image", "valid_q8_image", "valid_q4_image",
                                   "valid_mla_image", "valid_experts_last_image"])
def test_macros_equal_api_sizes(which, request, asan_bins, tmp_path):
    valid_image = request.getfixturevalue(which)
    header = (valid_image.parent / "model_config.h").read_text()
    program = tmp_path / "sizes.c"
    program.write_text(
        '#include <stdio.h>\n#include "colibri.h"\n#include "model_config.h"\n'
        "int main(int c, char **v) { static colibri_model m; FILE *f = fopen(v[1], \"rb\");\n"
        "  static unsigned char img[COLIBRI_MODEL_IMAGE_SIZE] __attribute__((aligned(64)));\n"
        "  (void)c; if (fread(img, 1, sizeof img, f) != sizeof img) return 3;\n"
        "  colibri_options o = {COLIBRI_MODEL_FINGERPRINT, 0};\n"
        "  int s = colibri_init(&m, img, sizeof img, &o);\n"
        "  printf(\"%d %zu %zu\\n\", s, colibri_state_size(&m, COLIBRI_MODEL_CONTEXT),\n"
        "         colibri_scratch_size_batch(&m, COLIBRI_MODEL_CONTEXT, COLIBRI_MODEL_BATCH));\n"
        "  uint64_t first = m.image_size, at; size_t size;\n"
        "  for (uint32_t k = 0; k < m.hp.n_layers * m.hp.n_experts; k++)\n"
        "    if (colibri_expert_block(&m, k / m.hp.n_experts, k % m.hp.n_experts, &at, &size) == 0\n"
        "        && (m.image[28] & 16) && at < first) first = at;\n"
        "  printf(\"%llu %zu %zu %zu %zu\\n\", (unsigned long long)first,\n"
        "         colibri_expert_cache_size(&m, 2), (size_t)COLIBRI_MODEL_EXPERT_CACHE_BYTES(2),\n"
        "         colibri_expert_cache_size(&m, 9), (size_t)COLIBRI_MODEL_EXPERT_CACHE_BYTES(9));\n"
        "  return 0; }\n")
    subprocess.run(["cc", "-std=c11", "-Isdk/include", f"-I{valid_image.parent}", str(program),
                    "build/asan/libcolibri.a", "-fsanitize=address,undefined", "-lm",
                    "-o", str(tmp_path / "sizes")], cwd=REPO, check=True)
    out = subprocess.run([str(tmp_path / "sizes"), str(valid_image)], capture_output=True,
                         text=True, check=True).stdout.split()
    assert int(out[0]) == 0
    assert int(out[1]) == _macro(header, "COLIBRI_MODEL_STATE_BYTES")
    assert int(out[2]) == _macro(header, "COLIBRI_MODEL_SCRATCH_BYTES")
    # The image's start a device keeps in memory, and the expert cache's arena.
    assert int(out[3]) == _macro(header, "COLIBRI_MODEL_RESIDENT_BYTES")
    assert int(out[4]) == int(out[5]) > 0 and int(out[6]) == int(out[7]) > int(out[4])


def test_static_sample_matches_transformers_and_refuses_other_image(tmp_path):
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    models = {}
    for name, seed in (("a", 11), ("b", 12)):
        model, _ = build_model("mixtral", seed=seed)
        save_checkpoint(model, tmp_path / name / "hf")
        convert(tmp_path / name / "hf", tmp_path / name / "out", context=32, progress=False)
        models[name] = model
    exe = _build_sample(tmp_path / "a" / "out", tmp_path)
    prompt = [3, 14, 15, 9]
    done = subprocess.run([str(exe), str(tmp_path / "a" / "out" / "model.bin"),
                           *map(str, prompt)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    with torch.no_grad():
        want = models["a"].generate(torch.tensor([prompt]), max_new_tokens=8,
                                    min_new_tokens=8, do_sample=False, pad_token_id=0,
                                    eos_token_id=None)[0, len(prompt):].tolist()
    assert [int(t) for t in done.stdout.split()] == want
    other = subprocess.run([str(exe), str(tmp_path / "b" / "out" / "model.bin"), "1"],
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 1
    assert "does not match the compiled-in model configuration" in other.stderr
