"""The process ncu launches: build inputs, check every variant, run each once in its NVTX range.

``python -m fuseci.harness SUITE --record PATH``; ``--time`` times the variants with CUDA events (no ncu). Its
record (:mod:`fuseci.records.harness`) is rewritten around each case, so a crash or hang names the case it was in."""
