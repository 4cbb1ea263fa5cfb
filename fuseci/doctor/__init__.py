"""``fuseci doctor``: check that this machine can run fuseci, and say how to fix what cannot. The checks run in
:data:`~fuseci.doctor.diagnosis.CHECKS` order; one whose prerequisite failed is ``SKIP``. Nothing raises for a
missing tool, GPU or library: each becomes a failed check with a fix."""

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
