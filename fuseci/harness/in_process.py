"""The in-process counters' probe: with ``FUSECI_CUPTI_PROBE=FILE`` the harness (run without ncu) counts every
measured call's kernels through :mod:`fuseci.harness.cupti` and appends one JSON line per call to FILE.
``FUSECI_CUPTI_TMA=0`` leaves the TMA pair out, ``FUSECI_CUPTI_CACHE=all`` resets the caches before each pass,
``FUSECI_CUPTI_REPLAY=user`` runs the call once per pass instead of CUPTI's kernel replay."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from fuseci.config.quantities import TMA_METRICS, ncu_metrics
from fuseci.errors import FuseciError
from fuseci.harness import arrays

log = logging.getLogger(__name__)

PROBE_ENV = "FUSECI_CUPTI_PROBE"
#: Metrics ncu computes from launch data or its own bookkeeping, not PerfWorks counters.
NOT_COUNTERS = ("launch__", "profiler__", "sm__maximum_warps_per_active_cycle_pct")


def counter_metrics(tma: bool) -> tuple[str, ...]:
    """fuseci's metrics that are hardware counters (PerfWorks metrics), in catalogue order."""
    return tuple(m for m in ncu_metrics(tma) if not m.startswith(NOT_COUNTERS) and (tma or m not in TMA_METRICS))


class Probe:
    """Counts each measured call's kernels and writes what it saw (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.counters: Any = None
        self.failed: str | None = None
        self._plain: dict[str, float] = {}

    def _write(self, line: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def _start(self) -> Any:
        if self.counters is None and self.failed is None:
            from fuseci.harness.cupti import Counters

            tma = os.environ.get("FUSECI_CUPTI_TMA", "1") != "0"
            cache = os.environ.get("FUSECI_CUPTI_CACHE", "none")
            replay = os.environ.get("FUSECI_CUPTI_REPLAY", "kernel")
            started = time.perf_counter()
            try:
                self.counters = Counters(counter_metrics(tma), cache_control=cache, replay=replay)
            except FuseciError as exc:
                self.failed = str(exc)
                self._write({"error": self.failed})
                log.error("%s", exc)
                return None
            c = self.counters
            self._write(
                {
                    "library": c.path,
                    "cupti_version": c.version,
                    "driver": c.driver,
                    "chip": c.chip,
                    "passes": c.passes,
                    "metrics": list(c.metrics),
                    "cache_control": c.cache_control,
                    "replay": c.replay,
                    "seconds_setup": time.perf_counter() - started,
                }
            )
        return self.counters

    def plain(self, name: str, call: Callable[[], Any]) -> None:
        """Time ``call`` once, synchronised, without counters: the cost the window adds to."""
        started = time.perf_counter()
        call()
        arrays.synchronize()
        self._plain[name] = time.perf_counter() - started

    @contextmanager
    def window(self, name: str, again: Callable[[], Any]) -> Iterator[None]:
        """Count the kernels launched inside the block as the range ``name`` (``again``: user replay's extra passes)."""
        counters = self._start()
        if counters is None:
            yield
            return
        with counters.window(arrays.synchronize, again) as seen:
            yield
        self._write(
            {
                "range": name,
                "kernels": seen.ranges,
                "launches": [asdict(launch) for launch in seen.launches],
                "dropped": seen.dropped,
                "seconds_plain": self._plain.get(name),
                "seconds_call": seen.seconds_call,
                "seconds_decode": seen.seconds_decode,
            }
        )


_probe: Probe | None = None


def get() -> Probe | None:
    """The probe when ``FUSECI_CUPTI_PROBE`` asks for one (one per process), else None."""
    global _probe
    path = os.environ.get(PROBE_ENV)
    if not path:
        return None
    if _probe is None:
        _probe = Probe(path)
    return _probe
