"""Inductor's autotuning choices in the harness process: which ``.best_config`` entries of the
compile cache its kernels used (:func:`listen`, :func:`used`: ``AutotuneCache.create`` wrapped as
soon as Inductor imports it), and the baseline's entries put in place before anything compiles
(:func:`pin`; :mod:`fuseci.measure.autotune` says why and keeps the file)."""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

from fuseci.files.atomic import atomic_write_text
from fuseci.measure import autotune as kept

log = logging.getLogger(__name__)

#: Inductor's module whose ``AutotuneCache.create`` gives each autotuned kernel its ``.best_config``.
MODULE = "torch._inductor.runtime.autotune_cache"
#: The ``.best_config`` files the process's kernels were given, in the order they were.
_SEEN: dict[str, None] = {}
_LISTENING: list[bool] = []
"""Holds ``True`` once :func:`listen` ran in this process."""


def cache_dir() -> Path | None:
    """Inductor's cache directory in this process (``TORCHINDUCTOR_CACHE_DIR``, else Inductor's
    default); None without Inductor."""
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).resolve()
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir

        return Path(inductor_cache_dir()).resolve()
    except Exception as exc:  # another PyTorch: keep nothing, measure as before
        log.debug("no Inductor cache directory: %s", exc)
        return None


def listen() -> None:
    """Note the ``.best_config`` file of every autotuning cache Inductor makes in this process, from
    when Inductor imports :data:`MODULE` (once per process)."""
    if _LISTENING:
        return
    _LISTENING.append(True)
    module = sys.modules.get(MODULE)
    if module is not None:
        _wrap(module)
    else:
        sys.meta_path.insert(0, _Importing())


class _Importing(importlib.abc.MetaPathFinder):
    """Wraps ``AutotuneCache.create`` of :data:`MODULE` once Inductor imports it (then leaves)."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None) -> ModuleSpec | None:
        if name != MODULE:
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _wrap(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _wrap(module: ModuleType) -> None:
    """Note what ``module.AutotuneCache.create`` gives each kernel (where this PyTorch has it)."""
    try:
        owner = module.AutotuneCache
        create = owner.create
    except AttributeError as exc:  # another PyTorch: keep nothing, measure as before
        log.debug("Inductor's autotuning caches are not listened to: %s", exc)
        return

    @functools.wraps(create)
    def noted(*args: Any, **kwargs: Any) -> Any:
        cache = create(*args, **kwargs)
        local = getattr(cache, "local_cache", None)
        if isinstance(local, tuple) and len(local) == 2 and isinstance(local[1], str):
            _SEEN[local[1]] = None
        return cache

    owner.create = staticmethod(noted)


def used(root: Path | None = None) -> dict[str, kept.Entry]:
    """The ``.best_config`` entries the process's kernels were given that exist now (read or
    written after benchmarking), by their path under Inductor's cache directory ``root``."""
    root = root or cache_dir()
    if root is None:
        return {}
    out: dict[str, kept.Entry] = {}
    for name in _SEEN:
        try:
            path = Path(name).resolve()
            key = path.relative_to(root).as_posix()
        except (OSError, ValueError):
            continue  # another cache than the one fuseci keeps
        entry = kept.read_entry(path) if kept.ENTRY.fullmatch(key) else None
        if entry is not None:
            out[key] = entry
    return out


def install(entries: Mapping[str, kept.Entry], root: Path | None = None) -> tuple[int, int]:
    """Put checked entries under Inductor's cache directory ``root``, each atomically: (in place, replaced), the
    entries the cache now holds as kept (whoever put them there) and those this call put in place of another choice."""
    root = root or cache_dir()
    if root is None or not entries:
        return 0, 0
    in_place = replaced = 0
    for key, entry in entries.items():
        if not kept.ENTRY.fullmatch(key):  # checked before; never a path out of the cache
            continue
        path = root / key
        existed = os.path.lexists(path)
        if existed and kept.read_entry(path) == entry:
            in_place += 1
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, kept.json_text(entry), links=False)
        except OSError as exc:
            log.warning("cannot put the baseline's autotuning choice %s in the compile cache: %s", key, exc)
            continue
        in_place += 1
        replaced += existed
    return in_place, replaced


def pin(root: Path, gpu_name: str, suite: str) -> tuple[int, int]:
    """Install the entries kept beside the suite's baseline under the baseline root ``root`` for
    this card (:func:`fuseci.measure.autotune.file_for`), if any: (in place, replaced).

    Raises:
        BaselineError: the file is there but is not a good autotuning record.
    """
    entries = kept.load(kept.file_for(root, gpu_name, suite))
    return install(entries) if entries else (0, 0)
