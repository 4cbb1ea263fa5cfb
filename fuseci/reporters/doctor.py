"""``fuseci doctor`` rendered: a table for people, a JSON document for machines."""

from __future__ import annotations

import json
import textwrap

from fuseci import __version__
from fuseci.doctor.diagnosis import FORMAT, FORMAT_VERSION, CheckStatus, Diagnosis
from fuseci.reporters.text import clean


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    lines: list[str] = []
    for i, line in enumerate(text.splitlines() or [""]):
        lines += textwrap.wrap(
            line,
            width,
            initial_indent=indent if i else "",
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [""]
    return lines


def render_table(diagnosis: Diagnosis, width: int = 96, code: int | None = None) -> str:
    """The table for people: a row per check, a ``fix:`` line under each not OK, and the exit code (the diagnosis',
    unless the command ends with another ``code``: a JSON file it could not write)."""
    name_width = max(len("check"), *(len(c.title) for c in diagnosis.checks))
    indent = " " * (2 + name_width + 2 + len("status") + 2)
    lines = ["fuseci doctor", "", f"  {'check':<{name_width}}  status  detail"]
    for c in diagnosis.checks:
        body = _wrap(c.detail, width)
        if c.status is not CheckStatus.OK and c.fix:
            body += _wrap(f"fix: {c.fix}", width, indent="     ")
        lines.append(f"  {c.title:<{name_width}}  {c.status.value:<6}  {body[0]}".rstrip())
        lines += [f"{indent}{line}".rstrip() for line in body[1:]]
    counts = [
        f"{n} {label}"
        for status, label in (
            (CheckStatus.OK, "ok"),
            (CheckStatus.WARN, "warn"),
            (CheckStatus.FAIL, "failed"),
            (CheckStatus.SKIP, "skipped"),
        )
        if (n := sum(c.status is status for c in diagnosis.checks))
    ]
    lines += ["", f"fuseci doctor: {', '.join(counts)}; exit {diagnosis.exit_code if code is None else code}"]
    return "\n".join(map(clean, lines)) + "\n"  # one string, one line: see clean()


def render_json(diagnosis: Diagnosis) -> str:
    """Every check as a JSON document, for machines."""
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fuseci_version": __version__,
        "exit_code": diagnosis.exit_code,
        "checks": [
            {
                "name": c.name,
                "title": c.title,
                "status": c.status.value,
                "detail": c.detail,
                "fix": c.fix,
                "facts": dict(c.facts),
            }
            for c in diagnosis.checks
        ],
    }
    return json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n"
