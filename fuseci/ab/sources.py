"""Each case's source fingerprint as a baseline keeps it (:class:`fuseci.judge.baseline.SourcePrint`):
the case fingerprint :mod:`fuseci.ab.cases` takes, its parts kept apart so that what changed can
be named with its lines.

A case's parts are each top-level definition its fingerprint covers function by function (its
file, name, first and last line, decorators included, and the digest of its code without
positions), the import-time code of each such module, each file it covers whole, and what it
names outside the tree (an installed module, one found nowhere). What its fingerprint cannot
follow is kept as unproven. Two prints with the same parts are the same fingerprint of
:mod:`fuseci.ab.cases`; a part that differs says where.

Nothing is imported or run: files are only read and parsed.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from fuseci.ab.cases import Prints, Source
from fuseci.ab.reader import Tree
from fuseci.config.model import Suite
from fuseci.judge.baseline import IMPORT_TIME, SourcePart, SourcePrint


def _lines(nodes: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]) -> tuple[int, int]:
    """The first and last line of a definition (every one of its name), decorators included."""
    first = min(min([n.lineno, *(d.lineno for d in n.decorator_list)]) for n in nodes)
    return first, max(n.end_lineno or n.lineno for n in nodes)


def _definitions(source: Source, file: str, names: frozenset[str]) -> list[SourcePart]:
    out = []
    for name in sorted(names):
        nodes = source.defs.get(name, [])
        if not nodes:
            continue
        digest = hashlib.sha256("\n".join(ast.dump(n, include_attributes=False) for n in nodes).encode()).hexdigest()
        out.append(SourcePart(file, name, digest, _lines(nodes)))
    return out


def _part(line: str) -> SourcePart | None:
    """A part of :class:`fuseci.ab.cases.CasePrint` (``kind name digest``) the definitions do not
    already say: a file covered whole, a module's import-time code, what is outside the tree."""
    kind, _, rest = line.partition(" ")
    if kind == "function":
        return None
    if kind in ("file", "module"):
        path, _, digest = rest.rpartition(" ")
        return SourcePart(path, "" if kind == "file" else IMPORT_TIME, digest)
    return SourcePart("", line, "")


def source_prints(suite: Suite, tree: Path | Tree) -> dict[str, SourcePrint]:
    """Each case's source fingerprint (by case id) of ``suite`` as measured in ``tree``.

    Raises:
        OSError: the suite's files cannot be read.
    """
    prints = Prints(suite, tree)
    out = {}
    for case in suite.cases:
        print_ = prints.case(case.functions)
        sources = {m.own: m.source for m in prints.modules.values() if not isinstance(m, tuple)}
        parts = [p for line in print_.parts if (p := _part(line)) is not None]
        for file, names in print_.functions.items():
            if file in sources:
                parts += _definitions(sources[file], file, names)
        out[case.id] = SourcePrint(tuple(sorted(parts, key=lambda p: p.key)), print_.unproven)
    return out
