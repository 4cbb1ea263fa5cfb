"""The process ncu launches: build inputs, check every variant, run each once in its NVTX range.

Run as ``python -m fuseci.harness SUITE --record PATH``. For each case it builds the inputs from
their seeds, checks every variant (NaN-filled allocations, against its first call, ``unfused`` and
the float64 reference), skips measuring a wrong case, warms every variant up, then runs each once
in its :func:`fuseci.config.names.range_name` range, which is all ncu profiles. With ``--time``
the variants are timed with CUDA events instead (:mod:`.event_timing`); ``--no-checks`` skips the
checks. The record (:mod:`fuseci.records.harness`) is rewritten before and after each case, so a
crash or hang names the case it happened in.
"""
