"""Worst-case stack depth of a firmware call path, from GCC's per-function
stack usage and call graph (-fcallgraph-info=su: one .ci file per object,
VCG text) plus the disassembly for code GCC did not compile here (libm, libgcc).

    graph = load_callgraph(obj_dir)
    add_disassembly(graph, elf, objdump="aarch64-linux-gnu-objdump", nm=...)
    depth, path = worst_stack(graph, "aarch64_exception_dispatch",
                              indirect={"aarch64_irq_handle": {"...:run_prompt_job"}, ...})

A function's depth is its own frame plus the deepest of its callees. Calls
through a pointer appear as "__indirect_call"; the caller says, per calling
function, which functions such a call may reach. Recursion is an error (no
finite bound).
"""
from __future__ import annotations

import pathlib
import re
import subprocess
from dataclasses import dataclass, field

INDIRECT = "__indirect_call"
_NODE = re.compile(r'node: \{ title: "([^"]+)" label: "([^"]*)"')
_EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')
_FRAME = re.compile(r"\\n(\d+) bytes \(([^)]+)\)")
_FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
_SUB_SP = re.compile(r"\bsub\s+sp, sp, #(0x[0-9a-f]+|\d+)")
_PUSH = re.compile(r"\b(?:stp|str)\s+[^\[]*\[sp, #-(\d+)\]!")
_CALL = re.compile(r"\bbl\s+[0-9a-f]+ <([^>+]+)>")


@dataclass
class CallGraph:
    frames: dict[str, int] = field(default_factory=dict)      # function -> frame bytes
    qualifier: dict[str, str] = field(default_factory=dict)   # "static", "dynamic", ...
    calls: dict[str, set[str]] = field(default_factory=dict)  # function -> callees
    origin: dict[str, str] = field(default_factory=dict)      # "ci" or "disassembly"


def load_callgraph(obj_dir: pathlib.Path) -> CallGraph:
    graph = CallGraph()
    for ci in sorted(obj_dir.rglob("*.ci")):
        for line in ci.read_text().splitlines():
            node = _NODE.search(line)
            if node and (frame := _FRAME.search(node.group(2))):
                graph.frames[node.group(1)] = int(frame.group(1))
                graph.qualifier[node.group(1)] = frame.group(2)
                graph.origin[node.group(1)] = "ci"
            edge = _EDGE.search(line)
            if edge:
                graph.calls.setdefault(edge.group(1), set()).add(edge.group(2))
    return graph


def _aliases(elf: pathlib.Path, nm: str) -> dict[str, str]:
    """Symbol name -> address (hex) for every text symbol."""
    out = subprocess.run([nm, str(elf)], capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TtWw":
            table[parts[2]] = parts[0].lstrip("0") or "0"
    return table


def _disassembled_functions(elf: pathlib.Path, objdump: str) -> dict[str, tuple[int, set[str]]]:
    """Address (hex) -> (frame bytes, called names) from `objdump -d`."""
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(elf)], capture_output=True,
                          text=True, check=True).stdout
    functions: dict[str, tuple[int, set[str]]] = {}
    current = None
    for line in text.splitlines():
        head = _FUNC.match(line)
        if head:
            current = head.group(1).lstrip("0") or "0"
            functions[current] = (0, set())
            continue
        if current is None:
            continue
        frame, calls = functions[current]
        for pattern in (_SUB_SP, _PUSH):
            for amount in pattern.findall(line):
                frame += int(amount, 0)
        calls |= set(_CALL.findall(line))
        functions[current] = (frame, calls)
    return functions


def add_disassembly(graph: CallGraph, elf: pathlib.Path, objdump: str, nm: str) -> None:
    """Give every called function that has no .ci entry (libm, libgcc) a frame
    and callees read from the linked ELF's disassembly."""
    address_of = _aliases(elf, nm)
    functions = _disassembled_functions(elf, objdump)
    pending = {c for callees in graph.calls.values() for c in callees} - set(graph.frames)
    while pending:
        name = pending.pop()
        if name == INDIRECT or name in graph.frames:
            continue
        address = address_of.get(name)
        if address is None or address not in functions:
            continue  # not linked (a call GCC removed at link time, or never taken)
        frame, calls = functions[address]
        graph.frames[name] = frame
        graph.qualifier[name] = "disassembly"
        graph.origin[name] = "disassembly"
        graph.calls[name] = set(calls)
        pending |= set(calls) - set(graph.frames)


def _callees(graph: CallGraph, name: str, indirect: dict[str, set[str]]) -> set[str]:
    callees = set(graph.calls.get(name, set()))
    if INDIRECT in callees:
        if name not in indirect:
            raise KeyError(f"'{name}' calls through a pointer: say what it may reach")
        callees = (callees - {INDIRECT}) | indirect[name]
    return callees


def worst_stack(graph: CallGraph, root: str,
                indirect: dict[str, set[str]]) -> tuple[int, list[str]]:
    """(bytes, deepest call chain) below and including root. indirect maps
    each function that calls through a pointer to the functions those calls
    may reach (an empty set: the pointer is NULL in this firmware)."""
    memo: dict[str, tuple[int, list[str]]] = {}

    def depth(name: str, active: tuple[str, ...]) -> tuple[int, list[str]]:
        if name in active:
            raise ValueError(f"recursion: {' -> '.join(active + (name,))}")
        if name in memo:
            return memo[name]
        if name not in graph.frames:
            raise KeyError(f"no stack usage known for '{name}' (called from {active[-1]})")
        best: tuple[int, list[str]] = (0, [])
        for callee in sorted(_callees(graph, name, indirect)):
            sub = depth(callee, active + (name,))
            if sub[0] > best[0]:
                best = sub
        memo[name] = (graph.frames[name] + best[0], [name] + best[1])
        return memo[name]

    return depth(root, ())


def title(graph: CallGraph, name: str) -> str:
    """The graph's title of a function: `name` itself, or "file:name" for a
    static function (GCC's .ci naming); it must be unique."""
    if name in graph.frames:
        return name
    matches = [t for t in graph.frames if t.rsplit(":", 1)[-1] == name]
    if len(matches) != 1:
        raise KeyError(f"function '{name}': {len(matches)} matches in the call graph")
    return matches[0]


def indirect_callers(graph: CallGraph, root: str, indirect: dict[str, set[str]]) -> set[str]:
    """Functions reachable from root that call through a pointer (those calls
    followed as `indirect` says, where it says)."""
    seen, todo, found = set(), [root], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        callees = graph.calls.get(name, set())
        if INDIRECT in callees:
            found.add(name)
        todo.extend((callees - {INDIRECT}) | indirect.get(name, set()))
    return found
