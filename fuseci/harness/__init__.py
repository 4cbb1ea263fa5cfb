"""The process ncu launches: build inputs, check every variant, run each once in its NVTX range.

Run as ``python -m fuseci.harness SUITE --record PATH``. For each case it

1. builds the inputs on the GPU from their seeds (the same tensors on every run);
2. runs every variant twice with an allocator that fills new memory with NaN bytes, so an output
   element a kernel forgot to write cannot pass by holding an old result, and checks each output
   against the variant's first call (a result that changes from call to call is wrong), the
   unfused one, and the float64 reference when the case names one;
3. skips measuring a case with a wrong result (its numbers would mean nothing);
4. warms every variant up once more outside any range (compilation, caches of the library);
5. runs each variant once between ``RangePush``/``RangePop`` of :func:`fuseci.config.names.range_name`,
   which is all ncu profiles.

With ``--time`` (``fuseci bench``, and the timed pass of ``fuseci run``; no ncu) steps 4 and
5 are replaced by CUDA-event timing: each variant is warmed up, then the variants of a case are
timed interleaved, one call of each per round, every call bracketed by its own pair of events
on the current stream and taking the next of a rotation of input sets generated like the first
one from derived seeds, as many as make the rotation span at least 4x the L2 (at least two), so
no call finds its inputs in the cache. ``--no-checks`` skips step 2 (the timed pass of ``fuseci
run``, whose profiled pass checked). The device-to-device copy bandwidth is measured once, in
the same process.

The record (see :mod:`fuseci.records.harness`) is rewritten before and after each case, so a crash or a
hang leaves what was done and names the case it happened in. After a fault that loses the CUDA
context (an illegal address), the remaining cases are recorded as not run. This module and
``kernels/`` are the only places that import CuPy.
"""
