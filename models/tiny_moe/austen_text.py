"""Write Jane Austen's six novels as one plain-text file, for training the tiny demo model.

    apt-get download r-cran-janeaustenr && dpkg-deb -x r-cran-janeaustenr_*_all.deb pkg
    python3 models/tiny_moe/austen_text.py pkg/usr/lib/R/site-library/janeaustenr -o austen.txt

The Debian package r-cran-janeaustenr (MIT licence; the novels themselves are in the
public domain) stores each novel as an R character vector, one element per printed line,
in R's lazy-load database `data/Rdata.rdb` with its index `data/Rdata.rdx`. This script
reads those two files with the standard library only (no R needed): the index is a
gzip'd R serialization of list(variables = list(name = c(offset, length)), ...), and each
record of the database is a 4-byte big-endian length followed by a zlib stream holding
one serialized character vector.

Output: the novels in publication order, each paragraph on one line (the printed line
breaks joined with single spaces, runs of spaces collapsed, the `_emphasis_` underscores
dropped), novels separated by an empty line. Same input, same bytes out.
"""

from __future__ import annotations

import argparse
import gzip
import re
import struct
import sys
import zlib
from pathlib import Path

NOVELS = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma",
          "northangerabbey", "persuasion")

# R serialization item types (R Internals, "Serialization Formats")
_SYMSXP, _LISTSXP, _CHARSXP, _LGLSXP, _INTSXP, _STRSXP, _VECSXP = 1, 2, 9, 10, 13, 16, 19
_REFSXP, _NILVALUE = 255, 254
_HAS_ATTR, _HAS_TAG, _UTF8 = 1 << 9, 1 << 10, 1 << 15


class _Reader:
    """Just enough of R's XDR serialization format for the janeaustenr data files."""

    def __init__(self, data: bytes) -> None:
        if data[:2] != b"X\n":
            raise ValueError("not an R XDR serialization (no 'X\\n' header)")
        self.data, self.pos, self.refs = data, 2, []
        version = self.int()
        self.int()  # R version that wrote it
        self.int()  # oldest R version that can read it
        if version == 3:
            name_length = self.int()
            self.bytes(name_length)  # native encoding name

    def int(self) -> int:
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return value

    def bytes(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def item(self) -> object:
        flags = self.int()
        kind = flags & 0xFF
        if kind == _NILVALUE:
            return None
        if kind == _REFSXP:
            index = flags >> 8 or self.int()
            return self.refs[index - 1]
        if kind == _SYMSXP:
            name = self.item()
            self.refs.append(name)
            return name
        if kind == _CHARSXP:
            n = self.int()
            return None if n < 0 else self.bytes(n).decode("utf-8" if flags & _UTF8 else "latin-1")
        if kind == _LISTSXP:
            return self._pairlist(flags)
        value = self._vector(kind)
        if flags & _HAS_ATTR:
            attrs = self.item()
            names = attrs.get("names") if isinstance(attrs, dict) else None
            if names is not None and isinstance(value, list):
                return dict(zip(names, value))
        return value

    def _pairlist(self, flags: int) -> dict:
        out = {}
        while True:
            if flags & _HAS_ATTR:
                self.item()
            tag = self.item() if flags & _HAS_TAG else None
            out[tag] = self.item()
            flags = self.int()
            if flags & 0xFF == _NILVALUE:
                return out
            if flags & 0xFF != _LISTSXP:
                raise ValueError(f"pairlist continues with item type {flags & 0xFF}")

    def _vector(self, kind: int) -> list:
        n = self.int()
        if kind in (_INTSXP, _LGLSXP):
            return list(struct.unpack(f">{n}i", self.bytes(4 * n)))
        if kind in (_STRSXP, _VECSXP):
            return [self.item() for _ in range(n)]
        raise ValueError(f"R item type {kind} is not supported here")


def read_novels(package_dir: Path) -> dict[str, list[str]]:
    """{name: lines} for every character vector in janeaustenr's data/ database."""
    data = package_dir / "data"
    index = _Reader(gzip.decompress((data / "Rdata.rdx").read_bytes())).item()
    database = (data / "Rdata.rdb").read_bytes()
    novels = {}
    for name, (offset, length) in index["variables"].items():
        record = database[offset:offset + length]
        novels[name] = _Reader(zlib.decompress(record[4:])).item()
    return novels


def paragraphs(lines: list[str]) -> list[str]:
    """Printed lines -> one string per paragraph (blank lines separate paragraphs)."""
    out, current = [], []
    for line in lines + [""]:
        line = (line or "").strip()
        if line:
            current.append(line)
        elif current:
            text = re.sub(r" {2,}", " ", " ".join(current)).replace("_", "")
            out.append(text)
            current = []
    return out


def austen_text(package_dir: Path) -> str:
    novels = read_novels(package_dir)
    return "\n\n".join("\n".join(paragraphs(novels[name])) for name in NOVELS) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("package_dir", type=Path,
                   help="the janeaustenr R package folder (holding data/Rdata.rdb)")
    p.add_argument("-o", "--out", type=Path, required=True, help="text file to write")
    args = p.parse_args(argv)
    text = austen_text(args.package_dir)
    args.out.write_text(text, encoding="utf-8")
    print(f"{args.out}: {len(text.encode())} bytes, {text.count(chr(10))} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
