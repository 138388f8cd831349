"""colibri-test: check a device (board, QEMU, or the Linux serial_runner)
against golden answers from Hugging Face transformers, over the serial
protocol (docs/serial-protocol.md).

    colibri-test golden HF_DIR -o suite.json [--cases 1,2,3/8 ...] [--image model.bin]
    colibri-test run --port URL suite.json [--junit FILE] [--tolerance 1e-4] [--timeout S]
    colibri-test info --port URL

``run`` connects (HELLO), checks the protocol, the model's start-up status,
its fingerprint and vocabulary against the suite, runs VERIFY (a corrupted
image fails every case as "weights corrupted: tensor N"), then per case:
RESET, FORWARD keeping the logits, GET_LOGITS in chunks (digest checked,
max |diff| against the reference <= tolerance), RESET, GENERATE (tokens must
be identical). It prints a table, writes JUnit XML if asked and exits 0 only
if everything passed (1: a check failed, 2: usage or suite error).

Library first: :func:`run_suite` returns a :class:`RunReport`;
:func:`format_report` and :func:`write_junit` present it; :func:`main` is the
console script.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np

from .errors import ColibriError
from .golden import DEFAULT_GEN, GoldenCase, Suite, load_suite, make_suite, parse_case, save_suite
from .protocol import (
    Info,
    SerialClient,
    SerialProtocolError,
    status_name,
)
from .status import Status
from .version import add_version_option

PROG = "colibri-test"
DEFAULT_TOLERANCE = 1e-4
DEFAULT_TIMEOUT = 30.0
TOP_K = 5


@dataclass
class CaseReport:
    name: str
    passed: bool = False
    max_diff: float | None = None
    tokens_matching: int | None = None  # leading tokens equal to the reference
    gen: int = 0
    ticks_per_token: int | None = None
    digest: int | None = None           # CRC-32 of the device's logits
    messages: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def tokens_ok(self) -> bool | None:
        return None if self.tokens_matching is None else self.tokens_matching == self.gen


@dataclass
class RunReport:
    port: str
    tolerance: float
    info: Info | None = None
    setup_error: str | None = None      # fails every case (no device, bad weights, ...)
    notes: list[str] = field(default_factory=list)
    cases: list[CaseReport] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.setup_error is None and all(c.passed for c in self.cases)


# ---- checks ----------------------------------------------------------------------------------

def check_device(client: SerialClient, suite: Suite, report: RunReport, *, verify: bool = True,
                 fingerprint: int | None = None) -> str | None:
    """HELLO and VERIFY; the reason the device cannot be tested, or None."""
    info = client.connect()
    report.info = info
    if info.init_status != 0:
        return (f"the model failed to start on the device: {status_name(info.init_status)}"
                + (" (the firmware was built for another model: fingerprint mismatch)"
                   if info.init_status == Status.E_CONFIG_MISMATCH else ""))
    want = fingerprint if fingerprint is not None else suite.fingerprint
    if want is None:
        report.notes.append("fingerprint not checked (make the suite with --image, or pass "
                            "--fingerprint)")
    elif info.fingerprint != want:
        return (f"model fingerprint mismatch: device 0x{info.fingerprint:08X}, expected "
                f"0x{want:08X} (another model is flashed)")
    if info.vocab_size != suite.vocab_size:
        return f"vocab size mismatch: device {info.vocab_size}, suite {suite.vocab_size}"
    if verify:
        result = client.verify()
        if result.status == Status.E_CHECKSUM:
            return (f"weights corrupted: tensor {result.bad_tensor} "
                    f"(VERIFY: {status_name(Status.E_CHECKSUM)})")
        if result.status != 0:
            return f"VERIFY failed: {status_name(result.status)}"
        report.notes.append(f"weights verified in {result.ticks} ticks")
    return None


def _compare_logits(client: SerialClient, case: GoldenCase, report: CaseReport,
                    tolerance: float) -> None:
    client.reset()
    result = client.forward(case.ids, logits=True, top_k=TOP_K)
    if result.status != 0:
        report.messages.append(f"FORWARD: {status_name(result.status)}")
        return
    data = client.read_logits()
    report.digest = zlib.crc32(data)
    if report.digest != result.logits_crc:
        report.messages.append(f"logits digest mismatch: read 0x{report.digest:08X}, device "
                               f"computed 0x{result.logits_crc:08X} (line corrupting data?)")
        return
    got = np.frombuffer(data, dtype="<f4")
    diff = np.abs(got.astype(np.float64) - case.logits.astype(np.float64))
    report.max_diff = float(np.nan_to_num(diff, nan=np.inf).max())
    if report.max_diff > tolerance:
        worst = int(np.argmax(np.nan_to_num(diff, nan=np.inf)))
        report.messages.append(f"max |logit diff| {report.max_diff:.3g} > {tolerance:g} (at id "
                               f"{worst}: device {got[worst]:.7g}, reference "
                               f"{case.logits[worst]:.7g})")
    if result.top and result.top[0][0] != int(np.argmax(got)):
        report.messages.append(f"RESULT top-1 id {result.top[0][0]} is not the argmax of the "
                               f"logits read ({int(np.argmax(got))})")


def _compare_tokens(client: SerialClient, case: GoldenCase, report: CaseReport) -> None:
    client.reset()
    result = client.generate(case.ids, case.gen)
    got = list(result.tokens)
    report.tokens_matching = next((i for i, (a, b) in enumerate(zip(got, case.tokens)) if a != b),
                                  min(len(got), len(case.tokens)))
    report.ticks_per_token = result.ticks_per_token
    if result.status != 0:
        report.messages.append(f"GENERATE: {status_name(result.status)} after {len(got)} tokens")
    if got != case.tokens:
        report.messages.append(f"tokens differ from token {report.tokens_matching}: device "
                               f"{got}, reference {case.tokens}")


def run_case(client: SerialClient, case: GoldenCase, info: Info,
             tolerance: float = DEFAULT_TOLERANCE) -> CaseReport:
    report = CaseReport(case.name, gen=case.gen)
    start = time.monotonic()
    needed = len(case.ids) + max(case.gen - 1, 0)
    if needed > info.context:
        report.messages.append(f"needs {needed} positions, the device holds {info.context}")
    else:
        _compare_logits(client, case, report, tolerance)
        _compare_tokens(client, case, report)
    report.passed = not report.messages
    report.seconds = time.monotonic() - start
    return report


def run_suite(client: SerialClient, suite: Suite, *, tolerance: float = DEFAULT_TOLERANCE,
              verify: bool = True, fingerprint: int | None = None,
              on_case: Callable[[CaseReport], None] | None = None) -> RunReport:
    """Check the device behind client against every case of suite."""
    report = RunReport(client.url, tolerance)
    start = time.monotonic()
    try:
        report.setup_error = check_device(client, suite, report, verify=verify,
                                          fingerprint=fingerprint)
        if report.setup_error is None:
            for case in suite.cases:
                report.cases.append(run_case(client, case, report.info, tolerance))
                if on_case is not None:
                    on_case(report.cases[-1])
    except SerialProtocolError as exc:
        report.setup_error = str(exc)
    if report.setup_error is not None:
        done = {c.name for c in report.cases}
        report.cases += [CaseReport(c.name, gen=c.gen, messages=[report.setup_error])
                         for c in suite.cases if c.name not in done]
    report.seconds = time.monotonic() - start
    return report


# ---- cross-target digests ---------------------------------------------------------------------

def digests(report: RunReport) -> dict[str, str]:
    return {c.name: f"0x{c.digest:08X}" for c in report.cases if c.digest is not None}


class DigestFileError(ColibriError):
    """An --expect-digests file that is not a JSON object of case name -> hex digest."""


def read_digests(path: str) -> dict[str, str]:
    """The digests a --save-digests run wrote: {case name: "0x1234ABCD"}."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise DigestFileError(f"{path}: cannot read digests: {exc}") from None
    ok = isinstance(data, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v
                                        in data.items())
    if ok:
        try:
            [int(v, 16) for v in data.values()]
        except ValueError:
            ok = False
    if not ok:
        raise DigestFileError(f"{path}: not a JSON object of case name -> hex digest")
    return data


def check_digests(report: RunReport, expected: dict[str, str], source: str) -> None:
    """Fail cases whose logits are not bit-identical to a recorded run."""
    for case in report.cases:
        want = expected.get(case.name)
        if want is not None and case.digest is not None and int(want, 16) != case.digest:
            case.messages.append(f"logits not bit-identical to {source}: digest "
                                 f"0x{case.digest:08X}, recorded {want}")
            case.passed = False


# ---- presentation -----------------------------------------------------------------------------

def _cell(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def format_report(report: RunReport) -> str:
    info = report.info
    lines = [f"{PROG}: {report.port}"]
    if info is not None:
        lines.append(f"device: board {info.board or '(unnamed)'}, protocol {info.protocol}, core "
                     f"{'.'.join(map(str, info.core_version))}, ticks = {info.tick_unit or '-'}")
        lines.append(f"model: fingerprint 0x{info.fingerprint:08X}, vocab {info.vocab_size}, "
                     f"context {info.context}, layers {info.n_layers}, experts {info.n_experts}, "
                     f"top_k {info.top_k}")
    lines += [f"note: {n}" for n in report.notes]
    lines.append("")
    lines.append(f"{'case':<12} {'result':<6} {'max|diff|':>10} {'tokens':>8} {'ticks/token':>12}")
    for c in report.cases:
        tokens = "-" if c.tokens_matching is None else f"{c.tokens_matching}/{c.gen}"
        lines.append(f"{c.name:<12} {'PASS' if c.passed else 'FAIL':<6} "
                     f"{_cell(c.max_diff, '10.3g'):>10} {tokens:>8} "
                     f"{_cell(c.ticks_per_token, 'd'):>12}")
    failed = [c for c in report.cases if not c.passed]
    if report.setup_error:
        lines += ["", f"FAILED: {report.setup_error}"]
    for c in failed:
        if report.setup_error and c.messages == [report.setup_error]:
            continue
        lines += [f"{c.name}: {m}" for m in c.messages]
    lines.append("")
    lines.append(f"{len(report.cases) - len(failed)} passed, {len(failed)} failed "
                 f"(tolerance {report.tolerance:g}, {report.seconds:.2f} s)")
    return "\n".join(lines)


def write_junit(report: RunReport, path: str | Path, suite_name: str = PROG) -> Path:
    failures = sum(not c.passed for c in report.cases) + (report.setup_error is not None)
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name=suite_name, tests=str(len(report.cases) + 1),
                          failures=str(failures), errors="0", time=f"{report.seconds:.3f}")
    props = ET.SubElement(suite, "properties")
    board = "device"
    if report.info is not None:
        board = report.info.board or board
        for key, value in (("port", report.port), ("board", board),
                           ("fingerprint", f"0x{report.info.fingerprint:08X}"),
                           ("tick_unit", report.info.tick_unit),
                           ("tolerance", f"{report.tolerance:g}")):
            ET.SubElement(props, "property", name=key, value=value)
    classname = f"colibri.{board}"
    check = ET.SubElement(suite, "testcase", classname=classname, name="device-check", time="0")
    if report.setup_error is not None:
        ET.SubElement(check, "failure", message=report.setup_error).text = report.setup_error
    for c in report.cases:
        case = ET.SubElement(suite, "testcase", classname=classname, name=c.name,
                             time=f"{c.seconds:.3f}")
        if not c.passed:
            text = "\n".join(c.messages)
            ET.SubElement(case, "failure", message=c.messages[0] if c.messages else "failed").text = text
        ET.SubElement(case, "system-out").text = (
            f"max_diff={_cell(c.max_diff, '.3g')} tokens={c.tokens_matching}/{c.gen} "
            f"ticks_per_token={_cell(c.ticks_per_token, 'd')}")
    path = Path(path)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path


# ---- command line -------------------------------------------------------------------------------

def _hex32(text: str) -> int:
    value = int(text, 16)
    if not 0 <= value <= 0xFFFFFFFF:
        raise argparse.ArgumentTypeError(f"{text} does not fit in 32 bits")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Test a Colibri device over the serial "
                                "protocol against golden answers from transformers.")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("golden", help="write a suite from a Hugging Face checkpoint")
    g.add_argument("hf_dir", help="checkpoint directory (config.json + weights)")
    g.add_argument("-o", "--output", required=True, help="suite JSON to write")
    g.add_argument("--cases", nargs="+", metavar="IDS[/N]",
                   help="prompts as comma-separated ids, /N tokens to generate (e.g. 1,2,3/8); "
                        "default: random prompts of 1, 5, 12 and 24 ids")
    g.add_argument("--gen", type=int, default=DEFAULT_GEN, help="tokens per case (default 8)")
    g.add_argument("--seed", type=int, default=0, help="seed of the random prompts")
    g.add_argument("--image", help="converted model.bin: record its fingerprint in the suite")
    r = sub.add_parser("run", help="run a suite on a device")
    r.add_argument("suite", help="suite JSON written by 'golden'")
    _port_options(r)
    r.add_argument("--junit", help="write JUnit XML here")
    r.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                   help="largest |logit difference| allowed (default 1e-4)")
    r.add_argument("--no-verify", action="store_true", help="skip VERIFY of the weights")
    r.add_argument("--fingerprint", type=_hex32, help="expected model fingerprint (overrides "
                   "the suite's)")
    r.add_argument("--save-digests", help="write the device's logits digests (JSON)")
    r.add_argument("--expect-digests", help="require logits bit-identical to these digests")
    i = sub.add_parser("info", help="print what the device says about itself")
    _port_options(i)
    add_version_option(p)
    return p


def _port_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", required=True, help="pyserial URL: socket://HOST:PORT, a pty or "
                   "/dev/tty* path")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help="seconds to wait for each reply (default 30)")
    p.add_argument("--connect-timeout", type=float, default=5.0,
                   help="seconds to retry a refused TCP connection (default 5)")
    p.add_argument("--baudrate", type=int, default=115200)


def _open(args) -> SerialClient:
    return SerialClient.open(args.port, timeout=args.timeout, baudrate=args.baudrate,
                             connect_timeout=args.connect_timeout)


def _cmd_golden(args) -> int:
    cases = [parse_case(spec, args.gen) for spec in args.cases] if args.cases else None
    suite = make_suite(args.hf_dir, cases, gen=args.gen, seed=args.seed, image=args.image)
    save_suite(suite, args.output)
    print(f"{PROG}: {len(suite.cases)} cases, vocab {suite.vocab_size}, needs context "
          f"{suite.context_needed} -> {args.output}")
    return 0


def _cmd_run(args) -> int:
    suite = load_suite(args.suite)
    expected = read_digests(args.expect_digests) if args.expect_digests else None
    try:
        client = _open(args)
    except SerialProtocolError as exc:
        report = RunReport(args.port, args.tolerance, setup_error=str(exc),
                           cases=[CaseReport(c.name, gen=c.gen, messages=[str(exc)])
                                  for c in suite.cases])
    else:
        with client:
            report = run_suite(client, suite, tolerance=args.tolerance,
                               verify=not args.no_verify, fingerprint=args.fingerprint)
    if expected is not None:
        check_digests(report, expected, args.expect_digests)
    if args.save_digests:
        Path(args.save_digests).write_text(json.dumps(digests(report), indent=1) + "\n")
    print(format_report(report))
    if args.junit:
        write_junit(report, args.junit)
    return 0 if report.passed else 1


def _cmd_info(args) -> int:
    with _open(args) as client:
        info = client.connect()
    for key, value in info.__dict__.items():
        shown = f"0x{value:08X}" if "fingerprint" in key else value
        print(f"{key:<22} {shown}")
    print(f"{'init':<22} {status_name(info.init_status)}")
    return 0 if info.init_status == Status.OK else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"golden": _cmd_golden, "run": _cmd_run, "info": _cmd_info}[args.command](args)
    except ColibriError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
