"""The core's expert cache (colibri_expert_cache.h; docs/core.md, An expert
cache in caller memory): routed experts read through a read hook into slots
of the caller's arena, the image given only up to its first expert block
(format 1.9, EXPERTS_LAST). tests/sdk/expert_cache.c (under ASan) runs a
prompt and three greedy steps and compares every logit, bit for bit, with the
whole image in memory, at cache sizes from the fewest slots the core can work
with up to every expert, with and without pinned experts, float32 and int4
images of the families whose feed-forward differs. A read that fails or a
block that fails its check ends the call with COLIBRI_E_EXPERT_UNAVAILABLE,
the position kept and the failure on record, and the run goes on after it."""
from __future__ import annotations

import re
import subprocess

import pytest
from colibri_tools import read_image
from golden_helpers import REPO

FAMILIES = ["mixtral", "qwen2_moe", "gpt_oss", "deepseek_v3"]
OK = re.compile(r"ok slots=(\d+) pinned=(\d+) acquires=(\d+) hits=(\d+) reads=(\d+) "
                r"bytes_read=(\d+)\n")


@pytest.fixture(scope="module")
def expert_cache():
    done = subprocess.run(["make", "-s", "-j2", "build/asan/expert_cache"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return REPO / "build" / "asan" / "expert_cache"


def _run(program, image, slots, pinned, fault=None):
    argv = [str(program), str(image), str(slots), str(pinned)] + ([fault] if fault else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def image_blocks(model):
    blocks = model.expert_blocks()
    return {(b.layer, b.expert): b.size for b in blocks}


@pytest.mark.parametrize("quant", [None, "int4"])
@pytest.mark.parametrize("family", FAMILIES)
def test_every_cache_size_gives_the_same_bits(family, quant, expert_cache, experts_last):
    image = experts_last(family, quant)
    model = read_image(image)
    blocks = image_blocks(model)
    top_k = model.record.top_k
    sizes = sorted({2, top_k, model.record.n_experts, len(blocks)})
    reads_at = {}
    for slots in sizes:
        found = OK.fullmatch(_run(expert_cache, image, slots, 0))
        assert found, slots
        n, _, acquires, hits, reads, bytes_read = map(int, found.groups())
        assert n == slots and hits + reads == acquires
        assert bytes_read <= reads * max(blocks.values())
        reads_at[slots] = reads
    # Every block fits: each is read once, at its first use.
    assert reads_at[len(blocks)] <= len(blocks)
    assert reads_at[len(blocks)] < reads_at[2]


@pytest.mark.parametrize("family", FAMILIES)
def test_pinned_experts_are_read_once_and_kept(family, expert_cache, experts_last):
    image = experts_last(family, "int4")
    blocks = image_blocks(read_image(image))
    pinned = len(blocks) // 2
    found = OK.fullmatch(_run(expert_cache, image, pinned + 2, pinned))
    assert found
    _, n_pinned, acquires, hits, reads, _ = map(int, found.groups())
    assert n_pinned == pinned
    # The pins are read at init (not acquires); every other read is a miss.
    assert reads == pinned + (acquires - hits)


@pytest.mark.parametrize("family", ["mixtral", "deepseek_v3"])
def test_a_failed_read_or_check_loses_nothing(family, expert_cache, experts_last):
    image = experts_last(family, "int4")
    pinned = 2
    found = OK.fullmatch(_run(expert_cache, image, 4, pinned))
    reads = int(found[5])
    for k in (pinned + 1, (pinned + reads) // 2, reads):
        for fault in (f"read:{k}", f"flip:{k}"):
            out = _run(expert_cache, image, 4, pinned, fault)
            assert OK.fullmatch(out), (fault, out)


def test_a_pinned_block_that_fails_refuses_the_cache(expert_cache, experts_last):
    image = experts_last("mixtral", "int4")
    for fault in ("read:1", "flip:2"):
        out = _run(expert_cache, image, 4, 2, fault)
        assert out == "ok init refused: failures=1\n", (fault, out)
