"""What crosses a process or a package, declared once: the harness record a profiled or timed
run leaves (:mod:`fuseci.records.harness`), the record of ``fuseci check --execute``'s child
(:mod:`fuseci.records.trials`), and the fusion ledger's rows, nodes and totals, what it is built
from and what changed in it (:mod:`fuseci.records.fusion`). Each is a typed document, validated
once where it enters; the packages that write and read them sit above.
"""
