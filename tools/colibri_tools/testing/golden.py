"""Golden suites for ``colibri-test``: what a device must answer, computed by
Hugging Face transformers from the original checkpoint (an independent
reference, not the C core).

A suite is a JSON file::

    {"format": "colibri-test-suite", "version": 1,
     "source": "path/to/hf_model", "model_type": "mixtral", "vocab_size": 97,
     "fingerprint": "0x852F7291" | null,      (from --image: the device must match)
     "cases": [{"name": "case0", "ids": [..], "gen": 8, "tokens": [..],
                "logits_f32le": "<base64 of vocab_size float32 LE>"}]}

``logits`` are the last prompt position's full logits (what FORWARD of
``ids`` keeps on the device); ``tokens`` are the ``gen`` greedy tokens after
``ids`` (argmax, ties to the lower id, as the device decodes).

    suite = make_suite("hf_model", [([1, 2, 3], 8)], image="out/model.bin")
    save_suite(suite, "suite.json")
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ColibriError

SUITE_FORMAT = "colibri-test-suite"
SUITE_VERSION = 1
DEFAULT_GEN = 8
DEFAULT_LENGTHS = (1, 5, 12, 24)
_CASE_SPEC = re.compile(r"^\s*(\d+(?:\s*,\s*\d+)*)\s*(?:/\s*(\d+)\s*)?$")


class SuiteError(ColibriError):
    """A suite file or case specification is invalid."""


@dataclass
class GoldenCase:
    name: str
    ids: list[int]
    gen: int
    tokens: list[int]
    logits: np.ndarray  # float32 [vocab_size]: the last prompt position

    def to_json(self) -> dict[str, Any]:
        raw = np.asarray(self.logits, dtype="<f4").tobytes()
        return {"name": self.name, "ids": self.ids, "gen": self.gen, "tokens": self.tokens,
                "logits_f32le": base64.b64encode(raw).decode("ascii")}

    @classmethod
    def from_json(cls, data: dict[str, Any], vocab_size: int, where: str) -> GoldenCase:
        try:
            logits = np.frombuffer(base64.b64decode(data["logits_f32le"], validate=True),
                                   dtype="<f4")
            case = cls(str(data["name"]), [int(i) for i in data["ids"]], int(data["gen"]),
                       [int(t) for t in data["tokens"]], logits.astype(np.float32))
        except (KeyError, TypeError, ValueError) as exc:
            raise SuiteError(f"case is malformed: {exc!r}", path=where) from exc
        if case.logits.size != vocab_size or len(case.tokens) != case.gen or not case.ids:
            raise SuiteError(f"case {case.name!r}: {case.logits.size} logits for vocab "
                             f"{vocab_size}, {len(case.tokens)} tokens for gen {case.gen}, "
                             f"{len(case.ids)} ids", path=where)
        return case


@dataclass
class Suite:
    vocab_size: int
    cases: list[GoldenCase]
    source: str = ""
    model_type: str = ""
    fingerprint: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def context_needed(self) -> int:
        """Positions the longest case fills (prompt + generated - 1)."""
        return max((len(c.ids) + max(c.gen - 1, 0) for c in self.cases), default=0)

    def to_json(self) -> dict[str, Any]:
        fingerprint = None if self.fingerprint is None else f"0x{self.fingerprint:08X}"
        return {"format": SUITE_FORMAT, "version": SUITE_VERSION, "source": self.source,
                "model_type": self.model_type, "vocab_size": self.vocab_size,
                "fingerprint": fingerprint, **self.extra,
                "cases": [c.to_json() for c in self.cases]}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "<suite>") -> Suite:
        if not isinstance(data, dict) or data.get("format") != SUITE_FORMAT:
            raise SuiteError(f"not a {SUITE_FORMAT} file", path=where)
        if data.get("version") != SUITE_VERSION:
            raise SuiteError(f"suite version {data.get('version')!r}, this tool reads "
                             f"{SUITE_VERSION}", path=where)
        vocab = int(data.get("vocab_size", 0))
        fingerprint = data.get("fingerprint")
        known = {"format", "version", "source", "model_type", "vocab_size", "fingerprint", "cases"}
        return cls(vocab, [GoldenCase.from_json(c, vocab, where) for c in data.get("cases", [])],
                   str(data.get("source", "")), str(data.get("model_type", "")),
                   None if fingerprint is None else int(str(fingerprint), 16),
                   {k: v for k, v in data.items() if k not in known})


def save_suite(suite: Suite, path: str | Path) -> Path:
    path = Path(path)
    path.write_text(json.dumps(suite.to_json(), indent=1) + "\n")
    return path


def load_suite(path: str | Path) -> Suite:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as exc:
        raise SuiteError(f"cannot read the suite: {exc}", path=path) from exc
    return Suite.from_json(data, str(path))


def parse_case(spec: str, default_gen: int = DEFAULT_GEN) -> tuple[list[int], int]:
    """``"1,2,3/8"`` -> ([1, 2, 3], 8); ``"1,2,3"`` uses default_gen."""
    match = _CASE_SPEC.match(spec)
    if match is None:
        raise SuiteError(f"case {spec!r}: expected comma-separated ids, then optionally "
                         f"/N tokens to generate (e.g. 1,2,3/8)")
    ids = [int(i) for i in match.group(1).split(",")]
    return ids, default_gen if match.group(2) is None else int(match.group(2))


def random_cases(vocab_size: int, *, lengths: Sequence[int] = DEFAULT_LENGTHS,
                 gen: int = DEFAULT_GEN, seed: int = 0) -> list[tuple[list[int], int]]:
    """Prompts of the given lengths with ids drawn uniformly from the vocabulary."""
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, vocab_size, size=n).tolist(), gen) for n in lengths]


def image_fingerprint(image: str | Path) -> int:
    """The fingerprint (meta CRC-32) of a converted image, after validating it."""
    from ..image.image_reader import read_image

    return read_image(image).fingerprint


def load_reference(hf_dir: str | Path):
    """The checkpoint as a float32 transformers model in eval mode (eager
    attention and experts: the reference, not the fast path)."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(hf_dir), dtype=torch.float32, attn_implementation="eager",
            experts_implementation="eager")
    except (OSError, ValueError, RecursionError) as exc:
        raise SuiteError(f"transformers cannot load the checkpoint: {exc}", path=hf_dir) from exc
    return model.eval()


def reference_case(model, ids: Sequence[int], gen: int) -> tuple[list[int], np.ndarray]:
    """(greedy tokens, last prompt position's logits) from the reference model.
    Each step runs the whole sequence again (no KV cache): slow but plain."""
    import torch

    sequence = list(ids)
    tokens: list[int] = []
    with torch.no_grad():
        logits = model(torch.tensor([sequence])).logits[0, -1].float()
        first = logits.numpy().astype(np.float32).copy()
        for step in range(gen):
            token = int(torch.argmax(logits))  # first maximum: ties to the lower id
            tokens.append(token)
            sequence.append(token)
            if step + 1 < gen:
                logits = model(torch.tensor([sequence])).logits[0, -1].float()
    return tokens, first


def make_suite(hf_dir: str | Path, cases: Sequence[tuple[Sequence[int], int]] | None = None, *,
               gen: int = DEFAULT_GEN, seed: int = 0,
               image: str | Path | None = None) -> Suite:
    """Run the reference on each (ids, gen) case (default: random_cases)."""
    model = load_reference(hf_dir)
    vocab = int(model.config.vocab_size)
    chosen = list(cases) if cases else random_cases(vocab, gen=gen, seed=seed)
    golden = []
    for index, (ids, n) in enumerate(chosen):
        bad = [i for i in ids if not 0 <= i < vocab]
        if bad or not ids:
            raise SuiteError(f"case {index}: ids {bad or ids} outside the vocabulary 0..{vocab - 1}")
        tokens, logits = reference_case(model, ids, n)
        golden.append(GoldenCase(f"case{index}", list(ids), n, tokens, logits))
    return Suite(vocab, golden, str(hf_dir), str(model.config.model_type),
                 None if image is None else image_fingerprint(image))
