"""The baseline model: what a suite measured when its baseline was recorded, per case and
variant, and the environment it was recorded under. Files are :mod:`fuseci.store.baselines`'s
business; fusion gains are derived from the stored quantities when comparing, so a baseline
has one source of truth."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fuseci import __version__
from fuseci.config.names import CASE, ENV_FIELDS, FRAMEWORK_ENV_FIELDS, VARIANT
from fuseci.frames.inventory import KernelLaunch
from fuseci.frames.metrics import SuiteResults, inventory


@dataclass(frozen=True, slots=True)
class VariantBaseline:
    """What one variant measured when the baseline was recorded."""

    values: Mapping[str, float]
    """Aggregated quantities by name (see :data:`fuseci.frames.metrics.VARIANT_QUANTITIES`)."""
    kernels: tuple[KernelLaunch, ...]
    """Kernel inventory in launch order."""


@dataclass(frozen=True, slots=True)
class Baseline:
    """One suite's baseline on one GPU."""

    suite: str
    """Suite id."""
    env: Mapping[str, Any]
    """Environment fingerprint it was recorded under."""
    cases: Mapping[str, Mapping[str, VariantBaseline]]
    """case id → variant id → measurements."""
    fuseci_version: str = __version__
    """fuseci version that wrote it."""


def from_results(results: SuiteResults, cases: set[str]) -> Baseline:
    """A baseline holding those of ``cases`` that the harness ran ok (measured, right results).

    A case that errored may have left some variants' kernels in the report; those are never a
    baseline, and a wrong case has nothing measured.
    """
    ok = set(results.record.ok_cases())
    out: dict[str, dict[str, VariantBaseline]] = {}
    for case in sorted(cases & ok):
        variants: dict[str, VariantBaseline] = {}
        for vid in results.variants[results.variants[CASE] == case][VARIANT]:
            values = results.variant_values(case, vid)
            if values is not None:  # quantities not measured (not timed, say) are left out
                known = {q: v for q, v in values.items() if not math.isnan(v)}
                variants[vid] = VariantBaseline(values=known, kernels=inventory(results.kernels, case, vid))
        out[case] = variants
    env = {k: results.env.get(k) for k in ENV_FIELDS if k in results.env or k not in FRAMEWORK_ENV_FIELDS}
    return Baseline(suite=results.suite, env=env, cases=out)
