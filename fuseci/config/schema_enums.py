"""The parts of the suite's JSON Schema (``fuseci/suite.schema.json``) that the quantity catalogue
decides: which quantities ``gates`` and ``expect`` take and which checks ``caught_by`` may name.

The committed schema holds them written out, so that editors read it as it is; a test holds the
file equal to :func:`derived` of itself, and ``python -m fuseci.config.schema_enums`` rewrites
the file after a quantity was added to :mod:`fuseci.config.quantities`.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from fuseci.config import quantities
from fuseci.config.model import CHECK_NAMES

#: Where each derived enum sits in the schema, by the path of keys that leads to it.
PLACES: dict[str, tuple[str, ...]] = {
    "gates": ("definitions", "gates", "propertyNames", "enum"),
    "expect": ("definitions", "expect", "propertyNames", "enum"),
    "caught_by": ("definitions", "checkName", "enum"),
}


def enums() -> dict[str, list[str]]:
    """The enums as the catalogue makes them: every gateable quantity for ``gates``, every gain
    for ``expect``, the checks of :data:`~fuseci.config.model.CHECK_NAMES` and every gateable
    quantity for ``caught_by``."""
    gateable = list(quantities.gateable())
    return {"gates": gateable, "expect": list(quantities.gains()), "caught_by": [*CHECK_NAMES, *gateable]}


def derived(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with the enums of :data:`PLACES` set to :func:`enums` (a copy; the rest as it was).

    Raises:
        KeyError: the schema has no object at one of :data:`PLACES`.
    """
    out = copy.deepcopy(schema)
    for part, values in enums().items():
        *path, last = PLACES[part]
        node = out
        for key in path:
            node = node[key]
        node[last] = values
    return out


def text(schema: dict[str, Any]) -> str:
    """The schema file's text: two-space indents, non-ASCII as it is, a trailing newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(path: Path | None = None) -> int:
    """Rewrite the schema file's derived enums (when they differ from the catalogue's); returns 0."""
    from fuseci.config.parse import SCHEMA_FILE

    target = path or SCHEMA_FILE
    old = target.read_text(encoding="utf-8")
    new = text(derived(json.loads(old)))
    if new != old:
        target.write_text(new, encoding="utf-8")
    print(f"{target}: {'enums rewritten from' if new != old else 'already in step with'} the quantity catalogue")
    return 0


if __name__ == "__main__":
    sys.exit(main())
