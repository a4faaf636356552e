#!/usr/bin/env python3
"""The main loops of the kernels in a CUDA object, cubin or shared library, read from their SASS
(cuobjdump, no GPU): per loop its instructions, FFMAs, shared loads and cp.async copies, and how many
FFMAs read two or three register operands from one register bank.

    python3 benchmarks/tools/sass_loops.py build/temp.linux-x86_64-cpython-311/csrc/cuda/launch_blocked.o \\
        --kernel blocked_kernel

Why: the fp32 SIMT rows' speed follows how ptxas allocates their registers, which a small change
anywhere in the kernel can move. blocked_64x128x8 ran 7% faster (H200, 4096^3) once its code changed
(8536545) with the same instructions in its main loop; the one difference found there was that 28-33%
of its FFMAs read two operands that are not in the operand reuse cache from one bank (register number
mod 2), against 75% before. The count is a hint, not a model: blocked_k16_64x64x16 went from 61% to
28% and ran as before. Read it beside a timing (blocked_variants/run.sh writes it next to its own).

A loop is a backward branch; those with at least --min-ffma FFMAs are listed (the K loops; a kernel
holds one per copy path). An FFMA's source read from the reuse cache is one the previous instruction
marked `.reuse` in the same operand slot; the others are read from the register file, and two of them
with the same register number mod 2 count as a same-bank pair.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_BRANCH = re.compile(r"\bBRA(?:\.\S+)?\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))")
_REG = re.compile(r"^[-|!]*R(\d+)")


@dataclass
class Loop:
    start: int
    end: int
    instrs: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    ffma: int = 0
    same_bank: int = 0


def parse_functions(sass: str) -> dict[str, list[tuple[int, str]]]:
    """cuobjdump -sass text -> {function name: [(address, instruction text without its predicate)]}."""
    funcs: dict[str, list[tuple[int, str]]] = {}
    current = None
    for line in sass.splitlines():
        m = re.match(r"\s*Function\s*:\s*(\S+)", line)
        if m:
            current = funcs.setdefault(m.group(1), [])
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            text = m.group(2).strip()
            if text.startswith("@"):
                text = text.split(None, 1)[1] if " " in text else ""
            current.append((int(m.group(1), 16), text))
    return funcs


def opcode(text: str) -> str:
    return text.split(None, 1)[0].split(".")[0] if text else ""


def same_bank_ffmas(instrs: list[str], banks: int = 2) -> tuple[int, int]:
    """(FFMAs, those reading at least two uncached register sources from one bank)."""
    ffma = pairs = 0
    cached: dict[int, int] = {}  # operand slot -> register the previous instruction kept for reuse
    for text in instrs:
        kept: dict[int, int] = {}
        if opcode(text) == "FFMA":
            ffma += 1
            sources = [s.strip() for s in text.split(None, 1)[1].split(",")[1:4]]
            read = []
            for slot, s in enumerate(sources):
                m = _REG.match(s)
                if not m:  # RZ, a constant or an immediate
                    continue
                reg = int(m.group(1))
                if cached.get(slot) != reg:
                    read.append(reg % banks)
                if ".reuse" in s:
                    kept[slot] = reg
            if any(read.count(b) >= 2 for b in set(read)):
                pairs += 1
        cached = kept
    return ffma, pairs


def loops_of(body: list[tuple[int, str]], min_ffma: int) -> list[Loop]:
    index = {addr: i for i, (addr, _) in enumerate(body)}
    out = []
    for i, (addr, text) in enumerate(body):
        m = _BRANCH.search(text)
        if not m or m.group(1) is None:
            continue
        target = int(m.group(1), 16)
        if target >= addr or target not in index:
            continue
        instrs = [t for _, t in body[index[target]:i + 1]]
        loop = Loop(target, addr, instrs)
        loop.ffma, loop.same_bank = same_bank_ffmas(instrs)
        if loop.ffma < min_ffma:
            continue
        for t in instrs:
            op = opcode(t)
            loop.counts[op] = loop.counts.get(op, 0) + 1
        out.append(loop)
    return out


def demangle(names: list[str]) -> dict[str, str]:
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return {n: n for n in names}
    res = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True)
    out = res.stdout.splitlines()
    return dict(zip(names, out)) if res.returncode == 0 and len(out) == len(names) else {n: n for n in names}


def report(sass: str, kernel: str | None, min_ffma: int) -> list[str]:
    funcs = parse_functions(sass)
    names = demangle(list(funcs))
    lines = []
    for name, body in funcs.items():
        pretty = names[name]
        if kernel and kernel not in pretty and kernel not in name:
            continue
        for loop in loops_of(body, min_ffma):
            c = loop.counts
            lines.append(f"{pretty}  loop 0x{loop.start:x}-0x{loop.end:x}: {len(loop.instrs)} instructions, "
                         f"FFMA {loop.ffma} ({loop.same_bank} same-bank, {100 * loop.same_bank / loop.ffma:.0f}%), "
                         f"LDS {c.get('LDS', 0)}, LDGSTS {c.get('LDGSTS', 0)}, BAR {c.get('BAR', 0)}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="CUDA objects (.o), cubins or shared libraries with device code")
    ap.add_argument("--kernel", help="only functions whose (demangled) name contains this")
    ap.add_argument("--min-ffma", type=int, default=64, help="list loops with at least this many FFMAs (64)")
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump",
                    help="the CUDA toolkit's cuobjdump (default: from PATH)")
    args = ap.parse_args(argv)
    status = 0
    for f in args.files:
        try:
            res = subprocess.run([args.cuobjdump, "-sass", f], capture_output=True, text=True)
        except FileNotFoundError:
            ap.error(f"cuobjdump not found ({args.cuobjdump}); pass --cuobjdump PATH")
        if res.returncode != 0:
            print(f"{f}: cuobjdump failed: {res.stderr.strip()}", file=sys.stderr)
            status = 1
            continue
        lines = report(res.stdout, args.kernel, args.min_ffma)
        print(f"# {f}: {len(lines)} loops")
        for line in lines:
            print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
