"""Fixtures for the serial protocol tests: the Linux serial_runner (built
with ASan + UBSan), a tiny converted model, a copy with one flipped weight
byte, and the golden suite transformers computes for it."""
from __future__ import annotations

import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
for _p in (REPO / "tests", REPO / "tests" / "sdk", REPO / "tests" / "serial", REPO / "tools"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from serial_helpers import SANITIZER_MARKS, Runner, make  # noqa: E402


@pytest.fixture(scope="session")
def runner_bin() -> pathlib.Path:
    make("build/asan/serial_runner")
    return REPO / "build" / "asan" / "serial_runner"


@pytest.fixture(scope="session")
def host_run_bin() -> pathlib.Path:
    make("build/host/colibri-run")
    return REPO / "build" / "host" / "colibri-run"


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> dict:
    """A converted tiny Mixtral (vocab 97, 2 layers, 5 experts, top-3)."""
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    root = tmp_path_factory.mktemp("serial_model")
    model, _ = build_model("mixtral", seed=0)
    save_checkpoint(model, root / "hf")
    convert(root / "hf", root / "out", context=64, progress=False)
    return {"root": root, "hf": root / "hf", "image": root / "out" / "model.bin",
            "vocab": model.config.vocab_size}


@pytest.fixture(scope="session")
def corrupted(tiny) -> tuple[pathlib.Path, int]:
    """The tiny image with one bit flipped in the first expert's gate weights
    (tests/sdk/broken_images.py): (path, index of that tensor)."""
    import broken_images

    valid = tiny["image"].read_bytes()
    data, expect = broken_images._defects(valid)["expert_weight_corrupted"]
    assert expect == {"init": 0, "verify": 5}
    path = tiny["root"] / "corrupted.bin"
    path.write_bytes(data)
    return path, broken_images.first_expert_gate(valid)


@pytest.fixture(scope="session")
def suite_file(tiny) -> pathlib.Path:
    """Golden suite from transformers (4 random prompts, 8 tokens each, plus
    one given case), with the image's fingerprint."""
    from colibri_tools.testing.golden import make_suite, random_cases, save_suite

    cases = random_cases(tiny["vocab"], lengths=(1, 6, 17), gen=8, seed=3) + [([5, 6, 7], 12)]
    suite = make_suite(tiny["hf"], cases, image=tiny["image"])
    return save_suite(suite, tiny["root"] / "suite.json")


@pytest.fixture(scope="module")
def runner(runner_bin, tiny, tmp_path_factory):
    r = Runner(runner_bin, tiny["image"], tmp_path_factory.mktemp("log") / "runner.err",
               "--board", "test-board")
    yield r
    log = r.stop()
    assert not any(mark in log for mark in SANITIZER_MARKS), log


@pytest.fixture
def start_runner(runner_bin, tmp_path):
    """Start extra runners (other images or options); stopped and checked after the test."""
    started: list[Runner] = []

    def start(image: pathlib.Path, *args: str) -> Runner:
        started.append(Runner(runner_bin, image, tmp_path / f"runner{len(started)}.err", *args))
        return started[-1]

    yield start
    for r in started:
        log = r.stop()
        assert not any(mark in log for mark in SANITIZER_MARKS), log


@pytest.fixture
def client(runner):
    from colibri_tools.protocol import SerialClient

    with SerialClient.open(runner.url, timeout=5.0) as c:
        c.connect()
        yield c
