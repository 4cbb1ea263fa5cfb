"""Measuring a suite: the harness command line and its files, the profiled run under ncu, the
timed run outside it, and the typed record they leave. Nothing here imports CuPy or pandas, but
:mod:`fuseci.measure.run`, which turns what was measured into frames."""
