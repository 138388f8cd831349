"""colibri-test: check a device (board, QEMU, or the Linux serial_runner)
against golden answers from Hugging Face transformers, over the serial
protocol (docs/serial-protocol.md).

    colibri-test golden HF_DIR -o suite.json [--cases 1,2,3/8 ...] [--image model.bin]
    colibri-test run --port URL suite.json [--junit FILE] [--tolerance 1e-4] [--timeout S]
    colibri-test run --board B --firmware F --weights W suite.json [--junit FILE]
    colibri-test info --port URL

``run`` connects (HELLO), checks the protocol, the model's start-up status,
its fingerprint and vocabulary against the suite, runs VERIFY (a corrupted
image fails every case as "weights corrupted: tensor N"), then per case:
RESET, FORWARD keeping the logits, GET_LOGITS in chunks (digest checked,
max |diff| against the reference <= tolerance), RESET, GENERATE (tokens must
be identical). It prints a table, writes JUnit XML if asked and exits 0 only
if everything passed (1: a check failed, 2: usage or suite error, 3: the
suite could not run: closed port, QEMU not starting, no answer in time; these
are JUnit errors, not failures).

With --board (and --firmware, --weights) ``run`` is one command: it boots the
board in QEMU (or flashes a real board with its [flash] method and talks to
--port), runs the suite and tears everything down; QEMU dies with it on any
signal.

Library first: :func:`run_suite` returns a :class:`RunReport`;
:func:`format_report` and :func:`write_junit` present it; :func:`main` is the
console script.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np

from ..errors import ColibriError
from ..image.status import Status
from ..protocol import (
    Info,
    SerialClient,
    SerialProtocolError,
    status_name,
)
from ..protocol.client import DeviceError
from ..version import add_version_option
from .golden import DEFAULT_GEN, GoldenCase, Suite, load_suite, make_suite, parse_case, save_suite

PROG = "colibri-test"
DEFAULT_TOLERANCE = 1e-4
DEFAULT_TIMEOUT = 30.0
EXIT_INFRA = 3          # the suite could not run: JUnit errors, not failures
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
    error: bool = False                 # not run: an infrastructure problem (JUnit <error>)

    @property
    def tokens_ok(self) -> bool | None:
        return None if self.tokens_matching is None else self.tokens_matching == self.gen


@dataclass
class RunReport:
    port: str
    tolerance: float
    info: Info | None = None
    setup_error: str | None = None      # fails every case (wrong model, bad weights, ...)
    infra_error: str | None = None      # no answer: closed port, QEMU down, timeout
    notes: list[str] = field(default_factory=list)
    cases: list[CaseReport] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return (self.setup_error is None and self.infra_error is None
                and all(c.passed for c in self.cases))

    def mark_unrun(self, suite: Suite, reason: str, *, error: bool) -> None:
        """Every case of `suite` not reported yet fails (or errs) with `reason`."""
        done = {c.name for c in self.cases}
        self.cases += [CaseReport(c.name, gen=c.gen, messages=[reason], error=error)
                       for c in suite.cases if c.name not in done]


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
    except DeviceError as exc:          # the device answered, wrongly: a failure
        report.setup_error = str(exc)
    except SerialProtocolError as exc:  # no answer (closed, timed out): not the device's verdict
        report.infra_error = str(exc)
    if report.setup_error is not None:
        report.mark_unrun(suite, report.setup_error, error=False)
    if report.infra_error is not None:
        report.mark_unrun(suite, report.infra_error, error=True)
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


def _result(case: CaseReport) -> str:
    return "PASS" if case.passed else "ERROR" if case.error else "FAIL"


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
        lines.append(f"{c.name:<12} {_result(c):<6} "
                     f"{_cell(c.max_diff, '10.3g'):>10} {tokens:>8} "
                     f"{_cell(c.ticks_per_token, 'd'):>12}")
    failed = [c for c in report.cases if not c.passed and not c.error]
    errors = [c for c in report.cases if c.error]
    if report.setup_error:
        lines += ["", f"FAILED: {report.setup_error}"]
    if report.infra_error:
        lines += ["", f"ERROR (the test could not run; not a verdict on the device): "
                      f"{report.infra_error}"]
    for c in failed:
        if report.setup_error and c.messages == [report.setup_error]:
            continue
        lines += [f"{c.name}: {m}" for m in c.messages]
    lines.append("")
    lines.append(f"{len(report.cases) - len(failed) - len(errors)} passed, {len(failed)} failed"
                 + (f", {len(errors)} errors" if errors else "")
                 + f" (tolerance {report.tolerance:g}, {report.seconds:.2f} s)")
    return "\n".join(lines)


def write_junit(report: RunReport, path: str | Path, suite_name: str = PROG) -> Path:
    """JUnit XML: a check that did not hold is a <failure>; a case that could
    not run (closed port, QEMU failing to start, a timeout) is an <error>."""
    failures = sum(not c.passed and not c.error for c in report.cases) + \
        (report.setup_error is not None)
    errors = sum(c.error for c in report.cases) + (report.infra_error is not None)
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name=suite_name, tests=str(len(report.cases) + 1),
                          failures=str(failures), errors=str(errors), time=f"{report.seconds:.3f}")
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
    if report.infra_error is not None:
        ET.SubElement(check, "error", message=report.infra_error).text = report.infra_error
    for c in report.cases:
        case = ET.SubElement(suite, "testcase", classname=classname, name=c.name,
                             time=f"{c.seconds:.3f}")
        if c.error:
            ET.SubElement(case, "error", message=c.messages[0]).text = "\n".join(c.messages)
        elif not c.passed:
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
    r = sub.add_parser("run", help="run a suite on a device (--port), or boot/flash a board "
                       "first (--board --firmware --weights)")
    r.add_argument("suite", help="suite JSON written by 'golden'")
    _port_options(r, required=False)
    b = r.add_argument_group("one command: boot (QEMU) or flash (real board), run, tear down")
    b.add_argument("--board", help="board name or .toml: boot it in QEMU when it can be "
                   "emulated, else flash it with its [flash] method (then --port is its serial)")
    b.add_argument("--firmware", help="firmware .elf/.hex built for the board (serial_runner)")
    b.add_argument("--weights", help="model.bin or a weights HEX")
    b.add_argument("--backend", help="flash backend instead of the board's default (qemu, "
                   "pyocd, openocd, west, scp)")
    b.add_argument("--build-dir", help="west: the Zephyr build directory (its firmware)")
    b.add_argument("--probe", help="debug probe serial number")
    b.add_argument("--storage", action="store_true", help="QEMU: give --weights to the firmware "
                   "as its storage file (semihosting) instead of loading it into the address "
                   "map: a paging firmware (samples/baremetal/paged_runner)")
    b.add_argument("--limit", type=float, default=600.0, help="QEMU: kill the board after this "
                   "many seconds (default 600)")
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


def _port_options(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--port", required=required, help="pyserial URL: socket://HOST:PORT, a pty "
                   "or /dev/tty* path")
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


def _unreachable(url: str, suite: Suite, tolerance: float, reason: str) -> RunReport:
    report = RunReport(url, tolerance, infra_error=reason)
    report.mark_unrun(suite, reason, error=True)
    return report


def _run_on_port(args, suite: Suite) -> RunReport:
    try:
        client = _open(args)
    except SerialProtocolError as exc:
        return _unreachable(args.port, suite, args.tolerance, str(exc))
    with client:
        return run_suite(client, suite, tolerance=args.tolerance, verify=not args.no_verify,
                         fingerprint=args.fingerprint)


def _run_in_qemu(args, board, suite: Suite) -> RunReport:
    """Boot the board in QEMU, run the suite over its TCP serial port, stop QEMU."""
    from ..board.qemu import QemuError, launch

    try:
        if args.storage:
            session = launch(board, args.firmware, None, timeout=args.limit,
                             storage=args.weights)
        else:
            session = launch(board, args.firmware, args.weights, timeout=args.limit)
    except QemuError as exc:
        return _unreachable(f"qemu:{board.name}", suite, args.tolerance, str(exc))
    with session:
        try:
            port = session.open_serial()
        except (QemuError, OSError) as exc:
            return _unreachable(session.url, suite, args.tolerance, str(exc))
        with SerialClient.from_port(port, session.url, timeout=args.timeout) as client:
            report = run_suite(client, suite, tolerance=args.tolerance,
                               verify=not args.no_verify, fingerprint=args.fingerprint)
        if report.infra_error is not None:       # did the firmware die? QEMU then exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                session.process.wait(timeout=2.0)
        status = session.process.poll()
        fault = session.explain(status) if status is not None else None
        if fault:      # the firmware died: the device's fault, whatever the line said
            report.infra_error = None
            report.setup_error = f"{board.name} stopped on a fault (exit {status}): {fault}"
            for case in report.cases:
                if case.error:
                    case.error, case.messages = False, [report.setup_error]
    return report


def _run_on_board(args, suite: Suite) -> RunReport:
    """--board: QEMU for an emulated board (unless another backend is asked
    for), else flash with the board's method and talk to --port."""
    from ..board.boards import load
    from ..board.flash import FlashError, plan_flash, run_plan

    board = load(args.board)
    backend = args.backend or ("qemu" if "machine" in board.emulate else None)
    if backend == "qemu":
        if args.firmware is None:
            raise UsageError("--board with QEMU needs --firmware (and --weights)")
        return _run_in_qemu(args, board, suite)
    if args.port is None:
        raise UsageError(f"board {board.name} is flashed, not emulated: give --port, its serial "
                         "device (/dev/ttyACM0, say)")
    plan = plan_flash(board, backend=backend, weights=args.weights, firmware=args.firmware,
                      build_dir=args.build_dir, probe=args.probe)
    try:
        run_plan(plan)
    except (FlashError, OSError) as exc:
        return _unreachable(args.port, suite, args.tolerance, f"flashing failed: {exc}")
    return _run_on_port(args, suite)


class UsageError(ColibriError):
    """Options that do not go together."""


def _cmd_run(args) -> int:
    suite = load_suite(args.suite)
    expected = read_digests(args.expect_digests) if args.expect_digests else None
    if args.board is not None:
        report = _run_on_board(args, suite)
    elif args.port is not None:
        report = _run_on_port(args, suite)
    else:
        raise UsageError("give --port URL (a running device), or --board B --firmware F "
                         "--weights W (boot or flash it first)")
    if expected is not None:
        check_digests(report, expected, args.expect_digests)
    if args.save_digests:
        Path(args.save_digests).write_text(json.dumps(digests(report), indent=1) + "\n")
    print(format_report(report))
    if args.junit:
        write_junit(report, args.junit)
    if report.passed:
        return 0
    failed = report.setup_error is not None or any(not c.passed and not c.error
                                                   for c in report.cases)
    return 1 if failed else EXIT_INFRA


def _cmd_info(args) -> int:
    with _open(args) as client:
        info = client.connect()
    for key, value in info.__dict__.items():
        shown = f"0x{value:08X}" if "fingerprint" in key else value
        print(f"{key:<22} {shown}")
    print(f"{'init':<22} {status_name(info.init_status)}")
    return 0 if info.init_status == Status.OK else 1


def _exit_on_signal(signum: int, _frame: object) -> None:
    """SIGTERM or SIGHUP (timeout, a CI cancel, a closed terminal) ends the run
    like Ctrl-C: the with-blocks close the port and stop QEMU."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    previous = {sig: signal.signal(sig, _exit_on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return {"golden": _cmd_golden, "run": _cmd_run, "info": _cmd_info}[args.command](args)
    except ColibriError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
