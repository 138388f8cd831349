"""colibri-vocab: the C token table compiles, and printing it equals tokenizer.decode.

The reference is `tokenizers`' own decode (and, for hand-made tables, the bytes the
test chose); the C side is a real program built with gcc -std=c11 -Wall -Wextra
-Werror -pedantic that prints colibri_vocab[id] for ids given on its command line.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from colibri_tools.converter.vocab_header import (
    VocabError,
    VocabTable,
    c_string,
    load_tokenizer,
    main,
    render_vocab_header,
    vocab_table,
    write_vocab_header,
)

REPO = Path(__file__).resolve().parents[2]
TINY_TOKENIZER = REPO / "models" / "tiny_moe" / "tokenizer.json"
CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"]

PRINT_IDS_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model_vocab.h"

/* print_ids MODE ID...: MODE "n" writes colibri_vocab_len[id] bytes, "s" uses fputs. */
int main(int argc, char **argv)
{
    int i;
    if (argc < 2) {
        return 2;
    }
    for (i = 2; i < argc; i++) {
        unsigned long id = strtoul(argv[i], NULL, 10);
        if (id >= COLIBRI_VOCAB_SIZE || strlen(colibri_vocab[id]) > colibri_vocab_len[id]) {
            return 3;
        }
        if (argv[1][0] == 'n') {
            (void)fwrite(colibri_vocab[id], 1, colibri_vocab_len[id], stdout);
        } else {
            (void)fputs(colibri_vocab[id], stdout);
        }
    }
    return 0;
}
"""

ONLY_TABLE_C = '#include "model_vocab.h"\nconst char *first_token(void);\n' \
               'const char *first_token(void) { return colibri_vocab[0]; }\n'

MIXED_TEXT = ("Caf\u00e9 na\u00efve \u2014 \u201cquoted\u201d \U0001F600 ??= tabs\tand\nlines, "
              "back\\slash \"quotes\" and plain words: the the the of of and and. ") * 8


def _compiler(name: str = "gcc") -> str:
    path = shutil.which(name)
    if path is None:
        package = "build-essential" if name == "gcc" else name
        pytest.skip(f"{name} is not installed (apt-get install {package})")
    return path


def _build(tmp_path: Path, header_text: str, source: str = PRINT_IDS_C,
           compiler: str = "gcc") -> Path:
    cc = _compiler(compiler)
    (tmp_path / "model_vocab.h").write_text(header_text, encoding="ascii")
    (tmp_path / "prog.c").write_text(source)
    exe = tmp_path / "prog"
    args = [cc, *CFLAGS, "-I", str(tmp_path), str(tmp_path / "prog.c"), "-o", str(exe)]
    if source is not PRINT_IDS_C:
        args = [cc, *CFLAGS, "-I", str(tmp_path), "-c", str(tmp_path / "prog.c"), "-o",
                str(tmp_path / "prog.o")]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return exe


def _print(exe: Path, ids: list[int], mode: str = "n") -> bytes:
    done = subprocess.run([str(exe), mode, *map(str, ids)], capture_output=True, check=False,
                          timeout=30)
    assert done.returncode == 0, done.returncode
    return done.stdout


def _byte_level_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([MIXED_TEXT], trainer)
    return tok


def _byte_fallback_tokenizer(decoder):
    from tokenizers import Tokenizer, models

    vocab = {"<unk>": 0, "<s>": 1} | {f"<0x{b:02X}>": 2 + b for b in range(256)}
    for piece in ("\u2581", "a", "b", "c", "ab", "\u2581ab", "\u2581c"):
        vocab[piece] = len(vocab)
    merges = [("a", "b"), ("\u2581", "ab"), ("\u2581", "c")]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True))
    tok.add_special_tokens(["<s>"])
    tok.decoder = decoder
    return tok


def _table(tok, **kwargs) -> VocabTable:
    import json

    return vocab_table(tok, json.loads(tok.to_str()), **kwargs)


# ---- the committed demo tokenizer -----------------------------------------------------

@pytest.fixture(scope="module")
def tiny_tokenizer():
    if not TINY_TOKENIZER.is_file():
        pytest.fail(f"{TINY_TOKENIZER} is missing (the committed demo model)")
    return load_tokenizer(TINY_TOKENIZER)[0]


def test_demo_header_prints_what_decode_gives(tmp_path: Path, tiny_tokenizer) -> None:
    out = tmp_path / "model_vocab.h"
    table = write_vocab_header(TINY_TOKENIZER, out)
    assert table.size == tiny_tokenizer.get_vocab_size()
    header = out.read_text(encoding="ascii")
    assert f"#define COLIBRI_VOCAB_SIZE {table.size}u" in header
    assert "static const char *const colibri_vocab[COLIBRI_VOCAB_SIZE]" in header
    exe = _build(tmp_path, header)
    text = "It is a truth universally acknowledged, that a single man in possession\n" \
           "of a good fortune, must be in want of a wife?"
    ids = tiny_tokenizer.encode(text, add_special_tokens=False).ids
    assert len(ids) > 10
    for chosen in (ids, ids[:3], [0, *ids[5:9], 1], list(range(2, 40))):
        want = tiny_tokenizer.decode(chosen).encode("utf-8")
        assert _print(exe, chosen, "n") == want
        assert _print(exe, chosen, "s") == want
    assert tiny_tokenizer.decode(ids) == text


def test_header_included_but_unused_compiles_warning_free(tmp_path: Path) -> None:
    header = render_vocab_header(VocabTable([b"", b"a"], [True, False]), "t.json")
    _build(tmp_path, header, ONLY_TABLE_C)
    if shutil.which("clang"):
        _build(tmp_path, header, ONLY_TABLE_C, compiler="clang")


def test_special_tokens_empty_or_marker(tiny_tokenizer) -> None:
    import json

    spec = json.loads(TINY_TOKENIZER.read_text(encoding="utf-8"))
    empty = vocab_table(tiny_tokenizer, spec)
    marker = vocab_table(tiny_tokenizer, spec, special="marker")
    assert empty.tokens[0] == b"" and empty.special[0]
    assert marker.tokens[0] == tiny_tokenizer.id_to_token(0).encode() == b"<|endoftext|>"
    assert empty.tokens[2:] == marker.tokens[2:]


def test_vocab_size_pads_with_empty_strings(tiny_tokenizer) -> None:
    import json

    spec = json.loads(TINY_TOKENIZER.read_text(encoding="utf-8"))
    size = tiny_tokenizer.get_vocab_size()
    padded = vocab_table(tiny_tokenizer, spec, vocab_size=size + 3)
    assert padded.size == size + 3 and padded.tokens[-3:] == [b"", b"", b""]
    with pytest.raises(VocabError, match="smaller than"):
        vocab_table(tiny_tokenizer, spec, vocab_size=size - 1)


# ---- other decoders -------------------------------------------------------------------

def test_byte_level_tokenizer_prints_exact_utf8(tmp_path: Path) -> None:
    tok = _byte_level_tokenizer()
    table = _table(tok)
    exe = _build(tmp_path, render_vocab_header(table, "byte_level.json"))
    ids = tok.encode(MIXED_TEXT[:120]).ids
    assert _print(exe, ids) == MIXED_TEXT[:120].encode("utf-8")
    # A single byte of a multi-byte character is that raw byte (decode shows U+FFFD).
    assert any(len(t) == 1 and t[0] >= 0x80 for t in table.tokens)


def test_byte_fallback_and_replace_decoders(tmp_path: Path) -> None:
    from tokenizers import decoders

    tok = _byte_fallback_tokenizer(decoders.Sequence([
        decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]))
    table = _table(tok)
    exe = _build(tmp_path, render_vocab_header(table, "fallback.json"))
    pieces = ["\u2581ab", "\u2581c", "<0xC3>", "<0xA9>", "a", "<0x00>", "b", "<s>"]
    ids = [tok.token_to_id(p) for p in pieces]
    assert _print(exe, ids) == " ab c\u00e9a\x00b".encode("utf-8")
    assert tok.decode(ids) == " ab c\u00e9a\x00b"


@pytest.mark.parametrize("make_decoder, reason", [
    (lambda d: None, "joins tokens with spaces"),
    (lambda d: d.WordPiece(), "WordPiece"),
    (lambda d: d.Sequence([d.Replace("\u2581", " "), d.ByteFallback(), d.Fuse(),
                           d.Strip(" ", 1, 1)]), "Strip of anything but leading spaces"),
    (lambda d: d.Sequence([d.Replace("\u2581", " "), d.Fuse(), d.Strip("a", 1, 0)]),
     "Strip of anything but leading spaces"),
    (lambda d: d.CTC(), "CTC"),
])
def test_refuses_decoders_that_do_not_concatenate(make_decoder, reason) -> None:
    from tokenizers import decoders

    tok = _byte_fallback_tokenizer(None)
    tok.decoder = make_decoder(decoders)
    with pytest.raises(VocabError, match=reason):
        _table(tok)


def test_refuses_decoder_steps_after_fuse() -> None:
    """A two-character Replace after Fuse acts across token boundaries ("b" then "c")."""
    from tokenizers import decoders

    tok = _byte_fallback_tokenizer(decoders.Sequence([decoders.Fuse(),
                                                      decoders.Replace("bc", "X")]))
    with pytest.raises(VocabError, match="after Fuse"):
        _table(tok)
    tok.decoder = decoders.Sequence([decoders.Fuse(), decoders.Replace("\u2581", " ")])
    assert _table(tok).tokens[tok.token_to_id("\u2581ab")] == b" ab"


class _SpacedDecode:
    """A tokenizer whose decode joins with spaces although its decoder says Fuse."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(self.inner.decode([i], skip_special_tokens=skip_special_tokens)
                        for i in ids)


def test_refuses_a_table_that_decode_disagrees_with() -> None:
    import json

    from tokenizers import decoders

    tok = _byte_fallback_tokenizer(decoders.Fuse())
    with pytest.raises(VocabError, match="not a plain concatenation of token strings: ids"):
        vocab_table(_SpacedDecode(tok), json.loads(tok.to_str()))


def test_cli_refuses_with_a_reason(tmp_path: Path, capsys) -> None:
    tok = _byte_fallback_tokenizer(None)
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    assert main([str(path), "-o", str(tmp_path / "v.h")]) == 1
    err = capsys.readouterr().err
    assert "colibri-vocab: error:" in err and str(path) in err and "spaces" in err
    assert not (tmp_path / "v.h").exists()


def test_cli_reports_an_unreadable_file(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{ not json")
    assert main([str(bad), "-o", str(tmp_path / "v.h")]) == 1
    assert "not a tokenizers tokenizer.json" in capsys.readouterr().err


# ---- escapes --------------------------------------------------------------------------

def test_c_string_escapes_every_awkward_byte(tmp_path: Path) -> None:
    tokens = [b"", b"plain", b'"q"', b"back\\slash", b"??=??/??'", b"\x01" + b"7",
              b"nul\x00after", b"\n\t\r", bytes(range(0x80, 0x100)), bytes(range(0x80))]
    table = VocabTable(tokens, [False] * len(tokens))
    exe = _build(tmp_path, render_vocab_header(table, "escapes"))
    for i, want in enumerate(tokens):
        assert _print(exe, [i]) == want, i
    assert _print(exe, list(range(len(tokens)))) == b"".join(tokens)
    assert c_string(b"a?b") == '"a\\?b"'
    assert c_string(b"\x017") == '"\\0017"'


# ---- SentencePiece-style (Llama, Mixtral) tokenizers ----------------------------------

SP_TEXT = ("Hello world, the caf\u00e9 is open \u2014 na\u00efve  double  spaces \U0001F600 "
           "and words words words of a small test.\n") * 6

START_RULE_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model_vocab.h"

/* print_text ID...: a whole text from its first token, with the header's start rule. */
int main(int argc, char **argv)
{
    unsigned strip = COLIBRI_VOCAB_STRIP_LEADING_SPACES;
    int first = 1;
    for (int i = 1; i < argc; i++) {
        unsigned long id = strtoul(argv[i], NULL, 10);
        const char *s = colibri_vocab[id];
        unsigned n = colibri_vocab_len[id];
        for (unsigned k = 0; k < n; k++) {
            if (s[k] == ' ' && (strip > 0 || (first && COLIBRI_VOCAB_FIRST_TOKEN_DROPS_SPACES))) {
                if (strip > 0) {
                    strip--;
                }
                continue;
            }
            strip = 0;
            putchar(s[k]);
        }
        if (n > 0) {
            first = 0;
        }
    }
    return 0;
}
"""


def _sentencepiece_tokenizer(decoder, pre_tokenizer=None):
    """A Llama-like tokenizer trained here: BPE with byte fallback over text whose
    spaces the normalizer turned into U+2581 (or a Metaspace pre-tokenizer)."""
    from tokenizers import Tokenizer, models, normalizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if pre_tokenizer is None:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                               normalizers.Replace(" ", "\u2581")])
    else:
        tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoder
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False)
    tok.train_from_iterator([SP_TEXT], trainer)
    tok.add_special_tokens(["<s>", "</s>"])
    return tok


def _check_texts(tmp_path: Path, tok, table: VocabTable) -> None:
    (tmp_path / "model_vocab.h").write_text(render_vocab_header(table, "sp.json"), encoding="ascii")
    (tmp_path / "prog.c").write_text(START_RULE_C)
    exe = tmp_path / "prog"
    subprocess.run([_compiler(), *CFLAGS, "-I", str(tmp_path), str(tmp_path / "prog.c"), "-o",
                    str(exe)], check=True)
    bos = tok.token_to_id("<s>")
    samples = [SP_TEXT[:90], " leading space", "caf\u00e9\U0001F600", "x", SP_TEXT[40:200]]
    for text in samples:
        ids = tok.encode(text).ids
        for chosen in (ids, [bos, *ids], ids[1:], ids[2:7]):
            if not chosen:
                continue
            want = tok.decode(chosen, skip_special_tokens=True).encode("utf-8")
            got = subprocess.run([str(exe), *map(str, chosen)], capture_output=True,
                                 check=True).stdout
            if b"\xef\xbf\xbd" not in want:  # a lone byte: decode shows U+FFFD, C the byte
                assert got == want, (text, chosen)
                assert table.text([i for i in chosen if not table.special[i]]) == want


def test_llama_style_strip_decoder(tmp_path: Path) -> None:
    """Mixtral's and Llama's tokenizer.json decoder: Replace, ByteFallback, Fuse, Strip."""
    from tokenizers import decoders

    tok = _sentencepiece_tokenizer(decoders.Sequence([
        decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
        decoders.Strip(" ", 1, 0)]))
    table = _table(tok)
    assert table.rule.strip_leading_spaces == 1 and not table.rule.first_token_drops_spaces
    header = render_vocab_header(table, "sp.json")
    assert "#define COLIBRI_VOCAB_STRIP_LEADING_SPACES 1u" in header
    _check_texts(tmp_path, tok, table)
    # continuing after a prompt: the tokens as they are (the space before a word stays)
    ids = tok.encode("Hello world").ids
    assert table.text(ids[:1]) + b"".join(table.tokens[i] for i in ids[1:]) == b"Hello world"


@pytest.mark.parametrize("scheme", ["always", "first"])
def test_metaspace_decoder(tmp_path: Path, scheme: str) -> None:
    from tokenizers import decoders, pre_tokenizers

    tok = _sentencepiece_tokenizer(decoders.Metaspace(prepend_scheme=scheme),
                                   pre_tokenizers.Metaspace(prepend_scheme=scheme))
    table = _table(tok)
    assert table.rule.first_token_drops_spaces and table.rule.strip_leading_spaces == 0
    _check_texts(tmp_path, tok, table)


def test_strip_on_each_token(tmp_path: Path) -> None:
    from tokenizers import decoders

    tok = _byte_fallback_tokenizer(decoders.Sequence([
        decoders.Replace("\u2581", " "), decoders.Strip(" ", 1, 0), decoders.ByteFallback(),
        decoders.Fuse()]))
    table = _table(tok)
    assert table.tokens[tok.token_to_id("\u2581ab")] == b"ab" and table.rule == type(table.rule)()


def test_cli_writes_a_sentencepiece_header(tmp_path: Path, capsys) -> None:
    from tokenizers import decoders

    tok = _sentencepiece_tokenizer(decoders.Sequence([
        decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
        decoders.Strip(" ", 1, 0)]))
    tok.save(str(tmp_path / "tokenizer.json"))
    assert main([str(tmp_path / "tokenizer.json"), "-o", str(tmp_path / "v.h")]) == 0
    assert "COLIBRI_VOCAB_STRIP_LEADING_SPACES 1u" in (tmp_path / "v.h").read_text()
