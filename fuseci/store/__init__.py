"""The formats fuseci keeps: baselines (where they lie, their lock and save), run files and
``--json`` results.

Each format keeps its dump and its load together in one module, over what every format shares
in :mod:`fuseci.files.versioned` (the version check, upgrades, bounded reading, exact writing).
"""
