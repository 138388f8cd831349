"""Static worst-case stack of an interrupt handler in a Cortex-M firmware.

Our own code: GCC's -fstack-usage (.su, bytes per function frame) and
-fcallgraph-info=su (.ci, the call graph with the same sizes), both written
beside the objects by ports/baremetal/cortex_m/port.mk. Library code (newlib's
memcpy/expf/..., libgcc) has neither, so its frames and calls are read from the
ELF's disassembly: every push/stmdb/vpush/sub sp of a function is added up
(an over-estimate when a function has several exit paths; fine for a bound).

    bound = worst_path(handler) + worst_path(preempting handler) + exception frame

Indirect calls must be resolved by the caller (which job function the handler
runs, which tick function the core calls); an unresolved one on the path is
an error, never a silent zero.
"""
from __future__ import annotations

import pathlib
import re
import subprocess
from dataclasses import dataclass, field

NODE = re.compile(r'node: \{ title: "([^"]+)" label: "[^"]*?\\n(\d+) bytes \(([^)]*)\)"')
EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')
FUNC = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
INSN = re.compile(r"^\s+[0-9a-f]+:\s+(\S+)\s*(.*)$")
INDIRECT = "__indirect_call"
# An exception taken while the FPU context is active stacks r0-r3, r12, lr,
# pc, xPSR and S0-S15, FPSCR, VPR/reserved: 26 words, plus 4 bytes of
# alignment padding at most.
EXTENDED_FRAME_BYTES = 26 * 4 + 4


class StackBoundError(Exception):
    """The call graph cannot give a bound (recursion, unresolved call, alloca)."""


@dataclass
class CallGraph:
    frames: dict[str, int] = field(default_factory=dict)
    calls: dict[str, set[str]] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)  # "su" or "disasm"


def _bare(name: str) -> str:
    return name.rsplit(":", 1)[-1]


def read_callgraph_info(obj_dir: pathlib.Path) -> CallGraph:
    """Frames and edges of every function compiled with -fcallgraph-info=su."""
    graph = CallGraph()
    for ci in sorted(obj_dir.rglob("*.ci")):
        text = ci.read_text()
        for title, size, kind in NODE.findall(text):
            if kind != "static":
                raise StackBoundError(f"{ci}: {title} has a {kind} stack (alloca or VLA)")
            graph.frames[title] = int(size)
            graph.source[title] = "su"
            graph.calls.setdefault(title, set())
        for source, target in EDGE.findall(text):
            graph.calls.setdefault(source, set()).add(target)
    return graph


def _register_bytes(operands: str) -> int:
    registers = operands[operands.find("{") + 1:operands.find("}")]
    total = 0
    for part in registers.split(","):
        part = part.strip()
        bounds = part.split("-")
        width = 8 if part.startswith("d") else 4
        count = 1
        if len(bounds) == 2:
            count = int(bounds[1][1:]) - int(bounds[0][1:]) + 1
        total += width * count
    return total


def _frame_bytes(mnemonic: str, operands: str) -> int:
    op = mnemonic.split(".")[0]
    if op in ("push", "vpush") or (op in ("stmdb", "vstmdb") and operands.startswith("sp!")):
        return _register_bytes(operands)
    match = re.match(r"sp, (?:sp, )?#(\d+)", operands)
    if op in ("sub", "subw") and match:
        return int(match.group(1))
    match = re.search(r"\[sp, #-(\d+)\]!", operands)
    if op.startswith("str") and match:
        return int(match.group(1))
    return 0


def read_disassembly(elf: pathlib.Path, objdump: str = "arm-none-eabi-objdump") -> CallGraph:
    """Frames and direct calls of every function in the ELF, from its code."""
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(elf)], check=True,
                          capture_output=True, text=True).stdout
    graph = CallGraph()
    current = None
    for line in text.splitlines():
        match = FUNC.match(line)
        if match:
            current = match.group(1)
            graph.frames[current] = 0
            graph.calls[current] = set()
            graph.source[current] = "disasm"
            continue
        match = INSN.match(line)
        if current is None or not match:
            continue
        mnemonic, operands = match.groups()
        graph.frames[current] += _frame_bytes(mnemonic, operands)
        target = re.search(r"<([^>+]+)>", operands)
        op = mnemonic.split(".")[0]
        if op == "bl" and target:
            graph.calls[current].add(target.group(1))
        elif op == "b" and target and target.group(1) != current:
            graph.calls[current].add(target.group(1))  # tail call
        elif op in ("blx", "bx") and operands.split()[0] not in ("lr",):
            graph.calls[current].add(INDIRECT)
    return graph


def merge(ours: CallGraph, library: CallGraph) -> CallGraph:
    """Our .su/.ci facts where they exist, the disassembly for the rest."""
    merged = CallGraph(dict(library.frames), {k: set(v) for k, v in library.calls.items()},
                       dict(library.source))
    for name in ours.frames:
        bare = _bare(name)
        merged.frames[name] = ours.frames[name]
        merged.calls[name] = set(ours.calls.get(name, set()))
        merged.source[name] = "su"
        if bare != name:
            merged.frames.pop(bare, None)  # a static: the qualified name is the one to use
    return merged


def _resolve(graph: CallGraph, caller: str, callee: str) -> str:
    if callee in graph.frames:
        return callee
    qualified = f"{caller.rsplit(':', 1)[0]}:{callee}" if ":" in caller else None
    if qualified and qualified in graph.frames:
        return qualified
    matches = [name for name in graph.frames if _bare(name) == callee]
    if len(matches) == 1:
        return matches[0]
    raise StackBoundError(f"{caller} calls {callee}, which has no stack size "
                          f"({'ambiguous' if matches else 'unknown'})")


def worst_path(graph: CallGraph, root: str,
               indirect: dict[str, list[str]]) -> tuple[int, list[str]]:
    """Deepest stack from root, and the path that reaches it. indirect maps a
    caller (its bare or qualified name) to the functions its indirect calls reach."""
    memo: dict[str, tuple[int, list[str]]] = {}

    def visit(name: str, active: tuple[str, ...]) -> tuple[int, list[str]]:
        if name in active:
            raise StackBoundError(f"recursion: {' -> '.join(active + (name,))}")
        if name in memo:
            return memo[name]
        best: tuple[int, list[str]] = (0, [])
        for callee in sorted(graph.calls.get(name, set())):
            if callee == INDIRECT:
                targets = indirect.get(name, indirect.get(_bare(name)))
                if targets is None:
                    raise StackBoundError(f"{name} makes an indirect call nobody resolved")
            else:
                targets = [callee]
            for target in targets:
                depth = visit(_resolve(graph, name, target), active + (name,))
                best = max(best, depth, key=lambda d: d[0])
        memo[name] = (graph.frames[name] + best[0], [name] + best[1])
        return memo[name]

    return visit(_resolve(graph, root, root), ())


def handler_bound(obj_dir: pathlib.Path, elf: pathlib.Path, handler: str, preempting: str,
                  indirect: dict[str, list[str]], objdump: str = "arm-none-eabi-objdump"
                  ) -> dict[str, object]:
    """Static worst case of the handler stack (MSP) while `handler` runs and
    `preempting` (a higher-priority handler) interrupts it once."""
    graph = merge(read_callgraph_info(obj_dir), read_disassembly(elf, objdump))
    depth, path = worst_path(graph, handler, indirect)
    nested, nested_path = worst_path(graph, preempting, indirect)
    return {"handler_bytes": depth, "handler_path": path, "preempting_bytes": nested,
            "preempting_path": nested_path, "frame_bytes": EXTENDED_FRAME_BYTES,
            "bound": depth + nested + EXTENDED_FRAME_BYTES,
            "library": sorted({p for p in path if graph.source.get(p) == "disasm"})}
