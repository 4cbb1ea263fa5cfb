"""``fuseci doctor``: check that this machine can run fuseci, and say how to fix what cannot.

The checks, in order (:data:`~fuseci.doctor.diagnosis.CHECKS`); one that cannot run because an earlier one failed is
``SKIP`` and names that one:

1. ``fuseci``: fuseci's and Python's versions and paths (always OK).
2. ``ncu``: Nsight Compute found (:func:`fuseci.measure.profile.find_ncu`) and its version.
3. ``reader``: NVIDIA's ``ncu_report`` importable (:func:`fuseci.frames.report.load_reader`): the
   PyPI package or the copy in ncu's ``extras/python``.
4. ``gpu``: ``nvidia-smi`` lists at least one GPU (name, compute capability, driver).
5. ``clocks``: current and maximum SM clocks of each GPU; WARN (never FAIL) when application
   clocks were changed or a user clock setting limits them. Only read: doctor changes nothing.
6. ``cupy``: ``python -m fuseci.harness --probe`` in a child process (this process never imports
   CuPy): CuPy, the CUDA runtime and one tiny kernel whose result is checked.
7. ``profiling``: the same probe under ncu with ``fuseci run``'s default settings and metrics:
   counter permission, counters held by DCGM, crashes, nothing profiled.
8. ``readback``: the report of that run read back with ``ncu_report``: exactly one kernel, in the
   probe's NVTX range, with a positive DRAM byte count or duration.

Nothing here raises for a missing tool, GPU or library: each becomes a failed check whose fix
says what to do. :func:`diagnose` runs them all; :mod:`fuseci.reporters.doctor`
renders the result.
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
