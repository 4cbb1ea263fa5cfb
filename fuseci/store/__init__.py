"""Versioned files fuseci keeps: baselines, run files, results, and the shared JSON helpers.

Each format keeps its dump and its load together in one module; :mod:`fuseci.store.versioned`
holds what every format shares (the version check, upgrades, bounded reading, exact writing).
"""
