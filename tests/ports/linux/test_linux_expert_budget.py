"""A model larger than its memory budget (docs/linux.md, Models larger than
memory): an image of ~200 MB run by colibri-run --memory-budget 64M inside a
memory cgroup of 64 MiB (page cache charged, caches dropped first) finishes
unkilled, within the limit, with the tokens and logits of the unlimited run.
Skipped with the reason where a memory cgroup cannot be made (not root, no
memory controller)."""
from __future__ import annotations

import pytest
from colibri_tools.bench import cgroup
from colibri_tools.image.image_spec import ModelRecord
from linux_tiny_image import write_tiny_image

BUDGET = 64 << 20


@pytest.fixture(scope="module")
def big_image(tmp_path_factory):
    """4 MoE layers of 16 float32 experts of 3 MiB: 192 MiB of experts."""
    record = ModelRecord(vocab_size=64, hidden_size=256, n_layers=4, n_heads=4, n_kv_heads=2,
                         head_dim=64, max_context=32, dense_intermediate=0,
                         expert_intermediate=1024, n_experts=16, shared_intermediate=0,
                         rms_eps=1e-5, rope_theta=10000.0, top_k=2, router_norm_topk=1)
    return write_tiny_image(tmp_path_factory.mktemp("big") / "model.bin", record=record)


def test_a_budget_smaller_than_the_image_runs_in_a_cgroup_of_it(big_image, colibri_run,
                                                                 tmp_path):
    why = cgroup.unavailable()
    if why:
        pytest.skip(why)
    assert big_image.stat().st_size > 3 * BUDGET
    common = [str(colibri_run), str(big_image), "--ids", "1,5,9,3,7,2,8,4", "--gen", "12",
              "--threads", "2"]
    free = cgroup.run_limited([*common, "--all-logits", str(tmp_path / "free.f32")], 8 << 30)
    assert free.returncode == 0, free.stderr
    held = cgroup.run_limited([*common, "--all-logits", str(tmp_path / "held.f32"),
                               "--memory-budget", str(BUDGET), "--stats"], BUDGET)
    assert held.returncode == 0 and held.oom_kills == 0, held.stderr
    assert held.stdout == free.stdout
    assert (tmp_path / "held.f32").read_bytes() == (tmp_path / "free.f32").read_bytes()
    assert 0 < held.peak_bytes <= BUDGET
    assert "expert_cache: budget=67108864" in held.stderr
