"""The formats fuseci keeps: baselines (where they lie, their lock and save), run files and
``--json`` results, each with its dump and its load in one module."""
