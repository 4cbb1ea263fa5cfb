"""``fuseci doctor``: check that this machine can run fuseci, and say how to fix what cannot.

The checks, in order (:data:`~fuseci.doctor.diagnosis.CHECKS`): fuseci and Python; ncu; NVIDIA's
``ncu_report`` reader; the GPUs ``nvidia-smi`` lists; their clocks (WARN, never FAIL, when a
user setting changed them: doctor only reads them); ``cupy``, the harness's probe in a child
process (one tiny kernel whose result is checked); ``profiling``, the same probe under ncu with
``fuseci run``'s settings; ``readback``, that run's report read back. One that cannot run because
an earlier one failed is ``SKIP`` and names that one. Nothing raises for a missing tool, GPU or
library: each becomes a failed check whose fix says what to do.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from fuseci.doctor.diagnosis import CheckStatus, Diagnosis, DoctorOptions, _skip
from fuseci.doctor.host import assess_clocks, check_fuseci, check_gpu, check_ncu, check_reader, read_clocks
from fuseci.doctor.profiling import check_cupy, check_profiling, check_readback


def diagnose(options: DoctorOptions | None = None) -> Diagnosis:
    """Run every check in order; skip those whose prerequisite failed. Changes nothing on the machine."""
    options = options or DoctorOptions()
    checks = [check_fuseci(options.python)]
    ncu_check, ncu_exe = check_ncu(options.ncu)
    reader = check_reader()
    gpu_check, gpus = check_gpu(options.smi_timeout_s)
    checks += [ncu_check, reader, gpu_check]
    if not gpus:
        return Diagnosis((*checks, *(_skip(name, "gpu") for name in ("clocks", "cupy", "profiling", "readback"))))
    checks.append(assess_clocks(read_clocks(gpus, options.smi_timeout_s)))
    with tempfile.TemporaryDirectory(prefix="fuseci-doctor-") as tmp:
        work = Path(tmp)
        cupy = check_cupy(options, work)
        checks.append(cupy)
        if ncu_exe is None or cupy.status is CheckStatus.FAIL:
            blocker = "ncu" if ncu_exe is None else "cupy"
            return Diagnosis((*checks, _skip("profiling", blocker), _skip("readback", blocker)))
        profiling, report_path = check_profiling(ncu_exe, options, work)
        checks.append(profiling)
        if report_path is None:
            checks.append(_skip("readback", "profiling"))
        elif reader.status is CheckStatus.FAIL:
            checks.append(_skip("readback", "reader"))
        else:
            checks.append(check_readback(report_path))
    return Diagnosis(tuple(checks))
