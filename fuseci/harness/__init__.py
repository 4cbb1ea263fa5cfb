"""The process ncu launches: build inputs, check every variant, run each once in its NVTX range.

Run as ``python -m fuseci.harness SUITE --record PATH``; with ``--time`` it times the variants with
CUDA events instead (no ncu). The record (:mod:`fuseci.records.harness`) is rewritten before and
after each case, so a crash or hang names the case it happened in.
"""
