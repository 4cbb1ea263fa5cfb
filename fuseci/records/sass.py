"""A kernel's compiled code as evidence: SASS text (``cuobjdump -sass -res-usage`` or
``nvdisasm`` output) read into a per-kernel summary of static counts of what moves bytes and
time, and two summaries diffed into a few phrases. The text is hostile input: nothing here
raises on any string."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field

from fuseci import validation as v

#: Kernels one text may describe at most; a text beyond it is read up to there.
MAX_KERNELS = 10_000
#: Longest kernel name kept (a longer one is not a name SASS tools print).
MAX_NAME = 4096
#: Phrases :func:`code_changes` gives at most.
MAX_CHANGES = 6

OpName = Annotated[str, Field(max_length=200, pattern=r"^[A-Z][A-Za-z0-9_.]*$"), v.Expect("an instruction form")]
"""An instruction form, ``LDG.E.128``."""


@dataclass(frozen=True, slots=True)
class KernelCode(v.Document):
    """One kernel's compiled code summarised by what moves bytes and time (static counts, not executed)."""

    __always__ = frozenset({"instructions", "ops"})

    registers: v.Count | None = None
    """Registers per thread (None: the text did not say)."""
    local_bytes: v.Count | None = None
    """Local memory per thread in bytes, its stack frame (where spills go) included (None: not said)."""
    instructions: v.Count = 0
    """Instructions in its code."""
    ops: Annotated[Mapping[OpName, v.Count], Field(max_length=2000)] = field(default_factory=dict)
    """The instructions that move bytes or run on the tensor cores, by form (:func:`_form`)."""

    @property
    def spills(self) -> tuple[int, int]:
        """Local stores and loads (``STL``, ``LDL``): spills, or arrays the compiler kept in memory."""
        return _family(self.ops, "STL"), _family(self.ops, "LDL")


def _family(ops: Mapping[str, int], base: str) -> int:
    return sum(n for f, n in ops.items() if _base(f) == base)


#: Memory instructions, whose form keeps only the modifiers that give a width.
_MEMORY = frozenset({
    "LDG", "STG", "LDS", "STS", "LDL", "STL", "LD", "ST", "LDGSTS",
    "ATOM", "ATOMG", "ATOMS", "RED", "REDG",
})  # fmt: skip
#: ... and those whose every modifier is part of the form (a shape: ``LDSM.16.M88.4``).
_WHOLE = frozenset({"LDSM", "STSM"})
_WIDTH = re.compile(r"^(E|U8|S8|U16|S16|32|64|128|256|\d+D|IM2COL|TILE)$")
#: The order families are said in: what moves the most bytes first.
_ORDER = ("LDG", "STG", "LDGSTS", "UTMALDG", "UTMASTG", "LDS", "STS", "LDSM", "STL", "LDL")


def _form(mnemonic: str) -> str | None:
    """An instruction's form (None: not counted): memory ones with width modifiers only (``LDG.E.128.CONSTANT``
    -> ``LDG.E.128``), the TMA's with its dimensions, matrix ones and matrix loads as they are."""
    base, *mods = mnemonic.split(".")
    if base.endswith("MMA") or base in _WHOLE:
        return mnemonic
    if base in _MEMORY or base.startswith(("UTMA", "UBLK")):
        return ".".join([base, *(m for m in mods if _WIDTH.match(m))])
    return None


_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")  # cuobjdump -sass
_RESOURCE_HEAD = re.compile(r"^\s*Function\s+(\S+?):\s*$")  # cuobjdump -res-usage
_RESOURCES = re.compile(r"\bREG:(\d+)\s+STACK:(\d+)\b.*?\bLOCAL:(\d+)\b")
_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")  # nvdisasm
_LABEL = re.compile(r"^\s*\.text\.(\S+):\s*$")
_SHI_REGISTERS = re.compile(r'\.sectioninfo\s+@"SHI_REGISTERS=(\d+)"')
_INSTRUCTION = re.compile(
    r"^\s*/\*[0-9a-fA-F]{4,}\*/\s+\{?\s*(?:@!?U?P(?:T|\d+)\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)[^;]*;"
)
_END = re.compile(r"^\s*\.{8,}\s*$")


@dataclass(slots=True)
class _Kernel:
    registers: int | None = None
    local_bytes: int | None = None
    mnemonics: list[str] = field(default_factory=list)
    """In code order."""


def _name(text: str) -> str | None:
    return text if 0 < len(text) <= MAX_NAME else None


def _read(text: str) -> dict[str, _Kernel]:
    """Each kernel's registers, local memory and instructions, as the text has them."""
    kernels: dict[str, _Kernel] = {}
    current: _Kernel | None = None
    resources: str | None = None  # the kernel whose -res-usage line comes next
    section: str | None = None  # nvdisasm: the .text section being declared

    def kernel(name: str) -> _Kernel | None:
        if name not in kernels and len(kernels) >= MAX_KERNELS:
            return None
        return kernels.setdefault(name, _Kernel())

    for line in text.splitlines():
        if m := _INSTRUCTION.match(line):
            if current is not None:
                current.mnemonics.append(m[1])
            continue
        if m := _FUNCTION.match(line):
            current = kernel(n) if (n := _name(m[1])) else None
            section = None
        elif m := _RESOURCE_HEAD.match(line):
            current, resources = None, _name(m[1])
        elif resources is not None and (m := _RESOURCES.search(line)):
            if (k := kernel(resources)) is not None:
                k.registers, k.local_bytes = int(m[1]), int(m[2]) + int(m[3])
            resources = None
        elif m := _SECTION.match(line):
            current, section = None, _name(m[1])
        elif section is not None and (m := _SHI_REGISTERS.search(line)):
            if (k := kernel(section)) is not None:
                k.registers = int(m[1])
        elif m := _LABEL.match(line):
            current = kernel(n) if (n := _name(m[1])) else None
        elif _END.match(line) or line.lstrip().startswith(".section"):
            current = None
    return {n: k for n, k in kernels.items() if k.mnemonics or k.registers is not None}


def summarize(text: str) -> dict[str, KernelCode]:
    """Each kernel of a SASS text (``cuobjdump -sass [-res-usage]`` or ``nvdisasm``) by its name as written
    (C++ names mangled); empty when the text holds no kernel (garbage, an empty or cut text)."""
    return {
        name: KernelCode(
            registers=k.registers,
            local_bytes=k.local_bytes,
            instructions=len(k.mnemonics),
            ops=dict(sorted(Counter(f for mn in k.mnemonics if (f := _form(mn))).items())),
        )
        for name, k in _read(text).items()
    }


def _base(f: str) -> str:
    return f.split(".", 1)[0]


def _family_order(base: str) -> tuple[int, str]:
    return (_ORDER.index(base) if base in _ORDER else len(_ORDER) + (0 if base.endswith("MMA") else 1), base)


def _said(forms: Iterable[tuple[str, int]]) -> str:
    return " + ".join(f"{f} ×{n}" for f, n in forms)


def code_changes(old: KernelCode, new: KernelCode) -> list[str]:
    """What differs between two summaries of a kernel, a phrase each, most bytes first, at most
    :data:`MAX_CHANGES`: ``LDG.E.128 ×2 → LDG.E ×8``, ``registers 32 → 40``; empty when nothing does."""
    out = []
    changed = sorted({f for f in {*old.ops, *new.ops} if old.ops.get(f, 0) != new.ops.get(f, 0)})
    for base in sorted({_base(f) for f in changed}, key=_family_order):
        forms = [f for f in changed if _base(f) == base]
        before = [(f, old.ops[f]) for f in forms if old.ops.get(f, 0)]
        after = [(f, new.ops[f]) for f in forms if new.ops.get(f, 0)]
        if len(forms) == 1 and before and after:
            out.append(f"{forms[0]} ×{before[0][1]} → ×{after[0][1]}")
        else:
            out.append(f"{_said(before) or f'no {base}'} → {_said(after) or 'none'}")
    for what, a, b, unit in (
        ("registers", old.registers, new.registers, ""),
        ("local memory", old.local_bytes, new.local_bytes, " bytes per thread"),
    ):
        if a is not None and b is not None and a != b:
            out.append(f"{what} {a} → {b}{unit}")
    if out and old.instructions != new.instructions:
        out.append(f"instructions {old.instructions} → {new.instructions}")
    if len(out) > MAX_CHANGES:
        out = [*out[: MAX_CHANGES - 1], f"{len(out) - MAX_CHANGES + 1} more changes"]
    return out


def pick(builds: Sequence[KernelCode], registers: int) -> KernelCode | None:
    """The build a run launched among those loaded under one name: the only one, or the only one with
    the registers per thread ncu saw; None when that does not decide."""
    if len(builds) == 1:
        return builds[0]
    matching = [b for b in builds if b.registers == registers]
    return matching[0] if matching and all(b == matching[0] for b in matching) else None
