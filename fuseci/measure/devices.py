"""Which GPUs a run may use (``fuseci run --gpus``), without touching CUDA in this process."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess

from fuseci.errors import UsageError

log = logging.getLogger(__name__)


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` entries: that variable's when set,
    else nvidia-smi's indices; empty when neither says (the harness will say what is wrong)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [e.strip() for e in env.split(",") if e.strip() and not e.strip().startswith("-")]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("cannot list the GPUs with nvidia-smi: %s", exc)
        return []
    return [line.strip() for line in out.stdout.splitlines() if re.fullmatch(r"\d+", line.strip())]


def select(spec: str, visible: list[str] | None = None) -> tuple[str | None, ...]:
    """The GPUs ``--gpus SPEC`` asks for: ``all``, a count (the first N visible) or a list (``0,1``);
    ``(None,)``: one GPU as this process sees them (nothing listed them, or a single one).

    Raises:
        UsageError: the spec is malformed, or names more or other GPUs than are visible.
    """
    gpus = visible_gpus() if visible is None else visible
    text = spec.strip().lower()
    if text == "all":
        chosen = gpus
    elif re.fullmatch(r"[1-9][0-9]{0,3}", text):
        if gpus and int(text) > len(gpus):
            raise UsageError(f"--gpus {spec}: only {len(gpus)} GPU(s) are visible ({', '.join(gpus)})")
        chosen = gpus[: int(text)]
    elif re.fullmatch(r"[0-9A-Za-z-]+(,[0-9A-Za-z-]+)*", spec.strip()):
        chosen = [g.strip() for g in spec.split(",")]
        unknown = [g for g in chosen if gpus and g not in gpus]
        if unknown or len(set(chosen)) != len(chosen):
            raise UsageError(f"--gpus {spec}: name each visible GPU once; visible: {', '.join(gpus) or 'none listed'}")
    else:
        raise UsageError(f"--gpus {spec!r}: write all, a number of GPUs, or a list of GPU indices like 0,1")
    if len(chosen) <= 1:
        return (None,) if not chosen or chosen == gpus else (chosen[0],)
    return tuple(chosen)
