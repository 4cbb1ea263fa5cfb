"""The autotuning choices a baseline was measured with (the ``.best_config`` entries of Inductor's
compile cache its kernels used), kept beside it as ``<gpu-slug>/<suite>.autotune.json`` so that a
run with a cold compile cache measures the same configurations (docs/SUITES.md, "The baseline's
choices are kept"). The file is hostile input until checked (:class:`AutotuneRecord`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fuseci import validation as v
from fuseci.config.names import gpu_slug
from fuseci.errors import BaselineError
from fuseci.files.atomic import atomic_write_text
from fuseci.files.versioned import DocumentFormat
from fuseci.records.harness import AutotuneEntries, AutotuneEntry

#: The environment variable that gives the harness processes the baseline root whose autotuning
#: records they put in place (set by ``fuseci run`` and ``update-baselines``).
ROOT_ENV = "FUSECI_AUTOTUNE_ROOT"
#: The file's format.
FORMAT = DocumentFormat(
    what="autotuning record",
    version=1,
    fix="record it again with `fuseci update-baselines`, or delete it (the next run then tunes afresh)",
    name="fuseci-autotune",
    error=BaselineError,
    max_bytes=16 << 20,
)
#: A ``.best_config`` entry's path in Inductor's cache, as Inductor names it (matched whole).
ENTRY = re.compile(r"[0-9A-Za-z_-]{1,16}/[0-9a-f]{64}\.best_config")
#: How a run's note (:attr:`fuseci.records.harness.HarnessRecord.pinned`) says that a kept choice
#: replaced another one the compile cache held.
REPLACED = "in place of another choice this compile cache held"
#: The most bytes of a ``.best_config`` file read.
MAX_ENTRY_BYTES = 64 << 10


Entry = dict[str, v.Scalar]
"""One configuration: its fields (``XBLOCK``, ``num_warps``, ``configs_hash``...) and scalar values."""


@dataclass(frozen=True, slots=True)
class AutotuneRecord(v.Document):
    """The file's body: the ``.best_config`` entries kept beside a baseline."""

    entries: AutotuneEntries
    """By their path in Inductor's cache."""


def pinned_note(profiled: str, timed: str) -> str:
    """The run's note of the kept choices, from its profiled and its timed harness: they share the
    compile cache, and the one that came first put the choices there, replacing what it held."""
    return timed if REPLACED in timed and REPLACED not in profiled else profiled or timed


def file_for(root: Path, gpu_name: str, suite: str) -> Path:
    """``<root>/<gpu-slug>/<suite>.autotune.json``, beside the suite's baseline."""
    return root / gpu_slug(gpu_name) / f"{suite}.autotune.json"


def load(path: Path) -> dict[str, Entry] | None:
    """The entries kept at ``path``, checked; None when there is no file.

    Raises:
        BaselineError: unreadable, not an autotuning record, newer, or an entry that is not one.
    """
    try:
        doc = FORMAT.load(path)
    except FileNotFoundError:
        return None
    body = {k: x for k, x in doc.items() if k not in ("format", "format_version")}
    try:
        return {str(k): dict(x) for k, x in v.validate(AutotuneRecord, body).entries.items()}
    except v.Invalid as exc:
        raise FORMAT.invalid(path, exc) from None


def save(entries: Mapping[str, Entry], path: Path) -> None:
    """Write the entries to ``path`` (atomically, keys sorted).

    Raises:
        BaselineError: an entry is not one, or the file cannot be written.
    """
    try:
        record = v.validate(AutotuneRecord, {"entries": dict(entries)})
    except v.Invalid as exc:
        raise FORMAT.invalid(path, exc) from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, FORMAT.dumps(record.to_json()), links=False)
    except OSError as exc:
        raise BaselineError(f"{path}: cannot write the autotuning record: {exc.strerror or exc}") from None


def json_text(entry: Entry) -> str:
    """An entry as a ``.best_config`` file holds it (JSON, as Inductor writes and reads it)."""
    return json.dumps(entry, sort_keys=True)


def read_entry(path: Path) -> Entry | None:
    """A ``.best_config`` file Inductor wrote, or None when it is missing or not one."""
    try:
        with path.open("rb") as f:
            value = json.loads(f.read(MAX_ENTRY_BYTES))
        return dict(v.validate(AutotuneEntry, value))  # type: ignore[type-abstract]  # an alias: validate takes any type
    except (OSError, ValueError, v.Invalid):
        return None
