"""Shared helpers of the golden tests (imported by name, not via conftest)."""
from __future__ import annotations

import json
import pathlib
import subprocess

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
FAMILIES = ["mixtral", "qwen2_moe", "qwen2_moe_norm", "olmoe", "qwen3_moe", "switch", "granitemoe",
            "granitemoeshared", "phimoe", "ernie4_5_moe", "glm4_moe", "dots1", "glm4_moe_yarn",
            "gpt_oss", "gpt_oss_yarn", "mixtral_window", "phimoe_window", "deepseek_v2",
            "deepseek_v3", "deepseek_v3_yarn", "deepseek_v2_greedy", "flex_olmo", "hunyuan_v1_moe",
            "hunyuan_v1_moe_alpha", "glm4_moe_lite", "minimax_m2", "minimax_m2_rotary", "exaone_moe",
            "dbrx", "dbrx_plain", "afmoe", "llama4_text", "llama4_text_plain", "jetmoe",
            "afmoe_unshared", "longcat_flash",
            "mimo_v2_flash", "lfm2_moe", "granitemoehybrid",
            "granitemoehybrid_rope", "qwen3_next",
            "qwen3_5_moe", "kimi_linear",
            "bailing_hybrid", "jamba",
            "nemotron_h"]  # new ones last: the quantized tests' prompts follow the order
REPORT = REPO / "build" / "golden_report.json"


def run_engine(binary: pathlib.Path, image: pathlib.Path, ids: list[int], *, gen: int = 0,
               logits_path: pathlib.Path | None = None, vocab: int = 0,
               extra: tuple[str, ...] = ()) -> tuple[list[int], np.ndarray | None]:
    cmd = [str(binary), str(image), "--ids", ",".join(map(str, ids)), "--gen", str(gen),
           "--context", "64", *extra]
    if logits_path is not None:
        cmd += ["--all-logits", str(logits_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    generated = [int(t) for t in done.stdout.split()]
    logits = None
    if logits_path is not None:
        logits = np.fromfile(logits_path, dtype="<f4").reshape(len(ids), vocab)
    return generated, logits


def record(family: str, key: str, value: float) -> None:
    """Keep the worst difference seen per family for the docs and notes."""
    REPORT.parent.mkdir(exist_ok=True)
    data = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    entry = data.setdefault(family, {})
    entry[key] = max(value, entry.get(key, 0.0))
    REPORT.write_text(json.dumps(data, indent=1, sort_keys=True))
