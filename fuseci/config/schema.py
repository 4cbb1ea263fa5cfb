"""The suite's JSON Schema (``fuseci/suite.schema.json``, draft-07), generated from the models of
:mod:`fuseci.config.document`; ``python -m fuseci.config.schema`` rewrites it after they or the
quantity catalogue change.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic.json_schema import DefsRef, GenerateJsonSchema

from fuseci.config.document import SuiteDoc
from fuseci.config.values import MAX_DIMS, MAX_ELEMENTS

_COMMENT = (
    "Generated from fuseci/config/document.py by `python -m fuseci.config.schema`; do not edit. The loader also "
    "checks what JSON Schema cannot say: a file of at most 1 MiB, at most 100000 values once YAML aliases are "
    "expanded, nesting at most 64 deep, integer literals of at most 64 characters, finite numbers, low < high for "
    f"uniform and randint inputs, std > 0 for normal inputs, at most 2**{MAX_ELEMENTS.bit_length() - 1} elements "
    f"per tensor (and at most {MAX_DIMS} dimensions), case ids unique within the suite and variant ids within the "
    "case (letter case ignored), params not named like inputs, tolerances below 100% after rounding, kernel-name "
    "patterns that compile as regular expressions, a ledger only on a variant that takes torch tensors (and on a "
    "planted variant caught by the ledger and the variant it is judged against), a factory only on a variant that "
    "takes torch tensors and compiled where it has a ledger, and Python identifiers exactly "
    "(the patterns here take any non-ASCII character)."
)
#: What a variant named ``unfused`` may not have: a gain to expect, a baseline to be judged by.
_NOT_FOR_UNFUSED = ("baseline", "caught_by")


class _SuiteNames(GenerateJsonSchema):
    """Definitions named as the suite file knows them: ``Case``, not its model's ``CaseDoc``."""

    def normalize_name(self, name: str) -> DefsRef:
        return DefsRef(super().normalize_name(name).removesuffix("Doc"))


def generate() -> dict[str, Any]:
    """The suite's JSON Schema (draft-07), from :class:`~fuseci.config.document.SuiteDoc`."""
    raw = _tidy(SuiteDoc.model_json_schema(ref_template="#/definitions/{model}", schema_generator=_SuiteNames))
    definitions = raw.pop("$defs")
    variants = definitions["Case"]["properties"]["variants"]
    long = definitions["LongVariant"]
    unfused_long = {
        **long,
        "properties": {
            k: ({"anyOf": [{"type": "null"}, {"type": "object", "maxProperties": 0}]} if k == "expect" else p)
            for k, p in long["properties"].items()
            if k not in _NOT_FOR_UNFUSED
        },
    }
    definitions["UnfusedVariant"] = {
        "description": "The variant every fusion gain is measured against; it has no gain to expect anything of.",
        "anyOf": [form for form in variants["additionalProperties"]["anyOf"] if "$ref" not in form] + [unfused_long],
    }
    variants["required"] = ["unfused"]
    variants["properties"] = {"unfused": {"$ref": "#/definitions/UnfusedVariant"}}
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "fuseci suite",
        "$comment": _COMMENT,
        **raw,
        "definitions": definitions,
    }


def _tidy(node: Any) -> Any:
    """pydantic's schema as editors read it best: no generated titles, no empty defaults, and a
    map's key rule as ``propertyNames`` (pydantic writes a pattern as ``patternProperties``,
    which would let any other key through)."""
    if isinstance(node, list):
        return [_tidy(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _tidy(x) for k, x in node.items() if k != "title" or not isinstance(x, str)}
    if out.get("default", 0) in (None, "", [], {}):
        del out["default"]
    patterns = out.pop("patternProperties", None)
    if patterns:
        ((pattern, value),) = patterns.items()
        out["propertyNames"] = {"pattern": pattern, **out.get("propertyNames", {})}
        out["additionalProperties"] = value
    return out


def text(schema: dict[str, Any]) -> str:
    """The schema file's text: two-space indents, non-ASCII as it is, a trailing newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(path: Path | None = None) -> int:
    """Write the schema file (when it differs from the models'); returns 0."""
    from fuseci.config.parse import SCHEMA_FILE

    target = path or SCHEMA_FILE
    new = text(generate())
    old = target.read_text(encoding="utf-8") if target.exists() else ""
    if new != old:
        target.write_text(new, encoding="utf-8")
    print(f"{target}: {'rewritten from' if new != old else 'already in step with'} the suite's models")
    return 0


__all__ = ["generate", "main", "text"]

if __name__ == "__main__":
    sys.exit(main())
