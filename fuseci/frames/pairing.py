"""Whether a report's kernels and a harness record belong together.

A report (``.ncu-rep``) and its record (``.harness.json``) are written by one ``fuseci run``, and
a run file keeps both of each suite. Judged together, they must describe one run: the record's
GPU is the one every kernel ran on, and the kernels fall in the NVTX ranges of exactly the
variants the record says it ran. A report from an H200 paired with an H100's record would
otherwise be judged, and its baseline rewritten, as the H100's.
"""

from __future__ import annotations

import pandas as pd

from fuseci.config import names
from fuseci.records.harness import HarnessRecord

#: Pairs named in a message before "and N more".
_SHOWN = 4


def _listed(items: list[str]) -> str:
    more = f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return ", ".join(items[:_SHOWN]) + more


def mismatch(kernels: pd.DataFrame, record: HarnessRecord) -> str:
    """What makes the per-kernel frame of a report and a harness record not one run's, or ``""``.

    Checked: every kernel's suite is the record's; every kernel ran on the record's GPU (the
    report's ``device__attribute_display_name``, where ncu recorded one); every kernel lies in
    the range of a variant the record ran (``measured``); and, unless the record says the run
    was stopped (a stopped run leaves half a report), every variant the record ran in a case
    that checked right has kernels in the report.
    """
    suites = sorted(set(kernels[names.SUITE]) - {record.suite})
    if suites:
        return f"the report holds suite(s) {_listed(suites)}, the record suite {record.suite!r}"
    devices = sorted({d for d in kernels[names.DEVICE_NAME] if isinstance(d, str) and d})
    if len(devices) > 1:
        return f"the report holds kernels of several GPUs ({_listed([repr(d[:100]) for d in devices])})"
    gpu = record.env.get("gpu_name")
    if devices and gpu != devices[0]:
        return f"the report was recorded on {devices[0][:100]!r}, the record on {str(gpu)[:100]!r}"
    ran = {(cid, vid) for cid, case in record.cases.items() for vid in case.measured}
    seen = set(zip(kernels[names.CASE], kernels[names.VARIANT], strict=True))
    stray = sorted(f"{c}/{v}" for c, v in seen - ran)
    if stray:
        return f"the report has kernels of {_listed(stray)}, which the record did not run in their NVTX ranges"
    if not record.interrupted:
        missing = sorted(f"{c}/{v}" for c, v in ran - seen if record.cases[c].ok)
        if missing:
            return f"the record ran {_listed(missing)}, of which the report has no kernels"
    return ""
