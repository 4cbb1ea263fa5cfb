"""The file edge, under everything that writes or reads a file: bounded reading with version
checks and upgrades (:mod:`fuseci.files.versioned`), atomic writes, locks for read-modify-write,
and report outputs. It knows no format of fuseci's; each format declares itself where it lives.
"""
