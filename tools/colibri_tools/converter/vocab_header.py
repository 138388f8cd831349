"""colibri-vocab: a C header with the text of every token, for firmware that prints text.

    colibri-vocab out/model/model_tokenizer.json -o model_vocab.h [--special marker]

The header defines COLIBRI_VOCAB_SIZE, `colibri_vocab[id]` (the bytes of token id as
a C string literal) and `colibri_vocab_len[id]` (their count, since a byte-level token
may hold a NUL). Printing generated text is then printing each id's string in turn.

That only works when the tokenizer's decode is the concatenation of per-token strings,
up to one rule about the start of the text. The decoder (tokenizer.json "decoder") is
read and reproduced per token: `Fuse`, `ByteFallback` (<0xNN> tokens are byte NN),
`ByteLevel` (GPT-2's byte <-> char map undone), `Replace` and `Strip` on each token are
accepted, and so are SentencePiece-style (Llama, Mixtral) decoders: a `Strip` of leading
spaces after `Fuse` (the text's first N spaces go: COLIBRI_VOCAB_STRIP_LEADING_SPACES)
and `Metaspace` (U+2581 is a space, and the first token printed loses its spaces:
COLIBRI_VOCAB_FIRST_TOKEN_DROPS_SPACES). No decoder (tokenizers then joins tokens with
spaces), `WordPiece`, `BPEDecoder` and `CTC` are refused, because they join with spaces,
treat the last token differently or drop tokens. The table and its rule are then checked
against `Tokenizer.decode` for every single id and for random id sequences; any
difference is refused too. Special tokens are empty strings (decode
skips them) or, with `--special marker`, their own text such as `<|endoftext|>`.

Library first: :func:`vocab_table` and :func:`render_vocab_header`; :func:`main` is the
console script. Every failure is a :class:`VocabError`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ColibriError
from ..version import add_version_option

GUARD = "COLIBRI_MODEL_VOCAB_H"
SPECIAL_MODES = ("empty", "marker")
CHECK_SEQUENCES = 400   # random id sequences compared with Tokenizer.decode
CHECK_SEED = 0
ENTRIES_PER_LINE = 4
_REFUSED = {
    "WordPiece": "it joins tokens with spaces and glues '##' pieces",
    "BPEDecoder": "the end-of-word suffix becomes a space except after the last token",
    "CTC": "it drops repeated and pad tokens",
}
METASPACE = "\u2581"


class VocabError(ColibriError):
    """The tokenizer cannot be written as a table of per-token strings."""


@dataclass(frozen=True)
class StartRule:
    """How the start of a decoded text differs from the plain concatenation."""

    strip_leading_spaces: int = 0      # Strip after Fuse: up to N spaces off the text's start
    first_token_drops_spaces: bool = False  # Metaspace: the first non-empty token loses its spaces


@dataclass(frozen=True)
class VocabTable:
    """The bytes every id prints as, which ids are special tokens, and the start rule."""

    tokens: list[bytes]
    special: list[bool]
    rule: StartRule = StartRule()

    @property
    def size(self) -> int:
        return len(self.tokens)

    def text(self, ids: Sequence[int]) -> bytes:
        """What printing `ids` one after another from the start of a text writes."""
        pieces = [self.tokens[i] for i in ids]
        first = next((k for k, piece in enumerate(pieces) if piece), None)
        if self.rule.first_token_drops_spaces and first is not None:
            pieces[first] = pieces[first].replace(b" ", b"")
        out = b"".join(pieces)
        n = self.rule.strip_leading_spaces
        while n > 0 and out.startswith(b" "):
            out, n = out[1:], n - 1
        return out


# ---- decoders, reproduced per token --------------------------------------------------

def _gpt2_char_to_byte() -> dict[str, int]:
    """The inverse of GPT-2's bytes_to_unicode map used by ByteLevel."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


def _byte_level(token: bytes) -> bytes:
    """A token of mapped characters back to its bytes; one holding any other character
    (an added token such as <|im_start|>) stays as it is, as tokenizers does."""
    table = _gpt2_char_to_byte()
    text = token.decode("utf-8")
    if all(ch in table for ch in text):
        return bytes(table[ch] for ch in text)
    return token


def _byte_fallback(token: bytes) -> bytes:
    if len(token) == 6 and token.startswith(b"<0x") and token.endswith(b">"):
        try:
            return bytes([int(token[3:5], 16)])
        except ValueError:
            pass
    return token


def _replace(step: dict[str, Any]) -> Any:
    pattern = step.get("pattern", {})
    if "String" not in pattern:
        raise VocabError(f"Replace decoder with a regular expression {pattern!r}: only plain "
                         "string patterns can be reproduced per token")
    old, new = pattern["String"].encode("utf-8"), step.get("content", "").encode("utf-8")
    return lambda token: token.replace(old, new)


def _strip(step: dict[str, Any]) -> Any:
    """Strip on each token: up to `start` leading and `stop` trailing `content` characters."""
    content = step.get("content", " ").encode("utf-8")
    start, stop = int(step.get("start", 0)), int(step.get("stop", 0))

    def cut(token: bytes) -> bytes:
        for _ in range(start):
            if token.startswith(content):
                token = token[len(content):]
        for _ in range(stop):
            if token.endswith(content) and token:
                token = token[:-len(content)]
        return token
    return cut


def _metaspace(step: dict[str, Any]) -> Any:
    mark = step.get("replacement", METASPACE).encode("utf-8")
    return lambda token: token.replace(mark, b" ")


def _metaspace_drops_first(step: dict[str, Any]) -> bool:
    """Whether Metaspace's decode removes the first token's marks (it does unless
    the prepend scheme is "never"; old files say add_prefix_space instead)."""
    if "prepend_scheme" in step:
        return step["prepend_scheme"] != "never"
    return bool(step.get("add_prefix_space", True))


def _after_fuse(rest: list[dict[str, Any]], path: str | Path | None) -> StartRule:
    """After Fuse a decoder sees the joined text, not tokens: a one-character Replace
    gives the same result per token, and a final Strip of leading spaces is a rule
    about the text's start; anything else acts across token boundaries."""
    for i, step in enumerate(rest):
        kind = step.get("type")
        if kind == "Strip" and i == len(rest) - 1 and step.get("content") == " " and \
                int(step.get("stop", 0)) == 0:
            return StartRule(strip_leading_spaces=int(step.get("start", 0)))
        pattern = step.get("pattern", {}).get("String", "") if kind == "Replace" else ""
        if len(pattern) != 1:
            what = "a Strip of anything but leading spaces" if kind == "Strip" else \
                f"decoder {kind}"
            raise VocabError(f"{what} after Fuse acts on the joined text, across token "
                             "boundaries: decode is not a plain concatenation of tokens",
                             path=path)
    return StartRule()


def decoder_plan(decoder: dict[str, Any] | None,
                 path: str | Path | None = None) -> tuple[list[Any], StartRule]:
    """Per-token byte transforms and the start rule equivalent to `decoder`
    (tokenizer.json "decoder")."""
    if decoder is None:
        raise VocabError("the tokenizer has no decoder, so tokenizers joins tokens with "
                         "spaces: decode is not a plain concatenation", path=path)
    kind = decoder.get("type")
    if kind == "Sequence":
        parts = decoder.get("decoders", [])
        kinds = [d.get("type") for d in parts]
        rule = StartRule()
        if "Fuse" in kinds:
            rule = _after_fuse(parts[kinds.index("Fuse") + 1:], path)
            parts = parts[:kinds.index("Fuse") + 1] + [
                p for p in parts[kinds.index("Fuse") + 1:] if p.get("type") == "Replace"]
        steps = []
        for part in parts:
            part_steps, part_rule = decoder_plan(part, path)
            steps += part_steps
            if part_rule.first_token_drops_spaces:
                rule = StartRule(rule.strip_leading_spaces, True)
        return steps, rule
    if kind == "Fuse":
        return [], StartRule()
    if kind == "ByteFallback":
        return [_byte_fallback], StartRule()
    if kind == "ByteLevel":
        return [_byte_level], StartRule()
    if kind == "Replace":
        return [_replace(decoder)], StartRule()
    if kind == "Strip":
        return [_strip(decoder)], StartRule()
    if kind == "Metaspace":
        return [_metaspace(decoder)], StartRule(
            first_token_drops_spaces=_metaspace_drops_first(decoder))
    reason = _REFUSED.get(kind, "it is not one colibri-vocab knows how to reproduce")
    raise VocabError(f"decoder {kind}: decode is not a plain concatenation of tokens "
                     f"({reason})", path=path)


# ---- the table ----------------------------------------------------------------------

def load_tokenizer(path: str | Path) -> tuple[Any, dict[str, Any]]:
    """(tokenizers.Tokenizer, the parsed JSON) of a tokenizer.json file."""
    from tokenizers import Tokenizer

    try:
        raw = Path(path).read_text(encoding="utf-8")
        return Tokenizer.from_str(raw), json.loads(raw)
    except OSError as exc:
        raise VocabError(f"cannot read the tokenizer: {exc.strerror or exc}", path=path) from exc
    except Exception as exc:  # tokenizers and json raise their own exception types
        raise VocabError(f"not a tokenizers tokenizer.json: {exc}", path=path) from exc


def vocab_table(tokenizer: Any, spec: dict[str, Any], *, special: str = "empty",
                vocab_size: int | None = None, path: str | Path | None = None) -> VocabTable:
    """Every id's bytes, checked against tokenizer.decode. vocab_size pads with empty
    strings (a model whose embedding has more rows than the tokenizer has tokens)."""
    if special not in SPECIAL_MODES:
        raise VocabError(f"special {special!r}: one of {', '.join(SPECIAL_MODES)}")
    steps, rule = decoder_plan(spec.get("decoder"), path)
    specials = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if vocab_size is not None and vocab_size < size:
        raise VocabError(f"--vocab-size {vocab_size} is smaller than the tokenizer's {size} "
                         "tokens", path=path)
    tokens, flags = [], []
    for i in range(size if vocab_size is None else vocab_size):
        piece = tokenizer.id_to_token(i)
        text = b"" if piece is None else piece.encode("utf-8")
        if i in specials:
            text = text if special == "marker" else b""
        else:
            for step in steps:
                text = step(text)
        tokens.append(text)
        flags.append(i in specials)
    table = VocabTable(tokens, flags, rule)
    check_against_decode(tokenizer, table, size, path)
    return table


def _decoded(tokenizer: Any, table: VocabTable, ids: list[int]) -> tuple[str, str] | None:
    """(tokenizer.decode, table text) when the table's bytes are whole UTF-8, else None."""
    try:
        mine = table.text([i for i in ids if not table.special[i]]).decode("utf-8")
    except UnicodeDecodeError:
        return None  # a byte-level piece of a character: decode shows U+FFFD, C prints bytes
    return tokenizer.decode(ids, skip_special_tokens=True), mine


def check_against_decode(tokenizer: Any, table: VocabTable, size: int,
                         path: str | Path | None = None) -> None:
    """Every single id and CHECK_SEQUENCES random sequences decode as the table says."""
    rng = random.Random(CHECK_SEED)
    normal = [i for i in range(size) if not table.special[i] and tokenizer.id_to_token(i)]
    trials = [[i] for i in normal]
    trials += [rng.choices(range(size), k=rng.randint(2, 8)) for _ in range(CHECK_SEQUENCES)]
    for ids in trials:
        pair = _decoded(tokenizer, table, ids)
        if pair is not None and pair[0] != pair[1]:
            raise VocabError(f"decode is not a plain concatenation of token strings: ids {ids} "
                             f"decode to {pair[0]!r}, the table gives {pair[1]!r}", path=path)


# ---- the header ---------------------------------------------------------------------

_NAMED_ESCAPES = {0x0A: "\\n", 0x09: "\\t", 0x0D: "\\r", 0x22: '\\"', 0x5C: "\\\\",
                  0x3F: "\\?"}  # '?' escaped: no trigraph can form


def c_string(data: bytes) -> str:
    """A C string literal of exactly these bytes (octal escapes never run on)."""
    out = []
    for byte in data:
        if byte in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[byte])
        elif 0x20 <= byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _rows(items: list[str]) -> list[str]:
    lines = []
    for first in range(0, len(items), ENTRIES_PER_LINE):
        part = items[first:first + ENTRIES_PER_LINE]
        lines.append(f"    /* {first:5d} */ " + " ".join(f"{item}," for item in part))
    return lines


def render_vocab_header(table: VocabTable, source_name: str, special: str = "empty") -> str:
    """The text of model_vocab.h for `table`."""
    longest = max((len(t) for t in table.tokens), default=0)
    len_type = "uint8_t" if longest <= 0xFF else "uint16_t"
    specials = "their own text" if special == "marker" else "empty strings"
    safe_source = "".join(c if c.isalnum() or c in "._-+ " else "_" for c in source_name)
    lines = [
        "/*",
        " * model_vocab.h - generated by colibri-vocab; do not edit.",
        f" * Source: {safe_source}",
        " * colibri_vocab[id] is the text of token id as bytes, colibri_vocab_len[id] its",
        " * length; the text of generated ids is their strings one after another (what the",
        f" * tokenizer's decode gives). Special tokens are {specials}.",
        " */",
        f"#ifndef {GUARD}",
        f"#define {GUARD}",
        "",
        "#include <stdint.h>",
        "",
        f"#define COLIBRI_VOCAB_SIZE {table.size}u",
        f"#define COLIBRI_VOCAB_MAX_TOKEN_BYTES {longest}u",
        "/* The start of a text (SentencePiece-style tokenizers): a program printing a",
        " * text from its first token drops up to this many leading spaces of it and, when",
        " * the second is 1, every space of the first token whose string is not empty; one",
        " * continuing a text already printed (after a prompt) prints tokens as they are. */",
        f"#define COLIBRI_VOCAB_STRIP_LEADING_SPACES {table.rule.strip_leading_spaces}u",
        f"#define COLIBRI_VOCAB_FIRST_TOKEN_DROPS_SPACES {int(table.rule.first_token_drops_spaces)}u",
        "",
        "static const char *const colibri_vocab[COLIBRI_VOCAB_SIZE] = {",
        *_rows([c_string(t) for t in table.tokens]),
        "};",
        "",
        f"static const {len_type} colibri_vocab_len[COLIBRI_VOCAB_SIZE] = {{",
        *_rows([f"{len(t)}u" for t in table.tokens]),
        "};",
        "",
        f"#endif /* {GUARD} */",
        "",
    ]
    return "\n".join(lines)


def write_vocab_header(tokenizer_path: str | Path, out_path: str | Path, *,
                       special: str = "empty", vocab_size: int | None = None) -> VocabTable:
    """Read tokenizer_path, check it, write the header to out_path; return the table."""
    tokenizer, spec = load_tokenizer(tokenizer_path)
    table = vocab_table(tokenizer, spec, special=special, vocab_size=vocab_size,
                        path=tokenizer_path)
    text = render_vocab_header(table, Path(tokenizer_path).name, special)
    try:
        Path(out_path).write_text(text, encoding="ascii")
    except OSError as exc:
        raise VocabError(f"cannot write the header: {exc.strerror or exc}", path=out_path) from exc
    return table


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="colibri-vocab", description="Write a C header with the "
                                "text of every token, for firmware that prints generated text.")
    p.add_argument("tokenizer", type=Path, help="tokenizer.json (model_tokenizer.json)")
    p.add_argument("-o", "--out", type=Path, required=True, help="header to write")
    p.add_argument("--special", choices=SPECIAL_MODES, default="empty",
                   help="special tokens as empty strings (default, like decode) or as their "
                        "own text such as <|endoftext|>")
    p.add_argument("--vocab-size", type=int, default=None,
                   help="pad the table with empty strings to this many ids (the model's "
                        "COLIBRI_MODEL_VOCAB_SIZE when it exceeds the tokenizer's size)")
    add_version_option(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        table = write_vocab_header(args.tokenizer, args.out, special=args.special,
                                   vocab_size=args.vocab_size)
    except ColibriError as exc:
        print(f"colibri-vocab: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}: {table.size} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
