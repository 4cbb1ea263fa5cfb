"""The fusion ledger: every kernel of a ``torch.compile``'d model's forward, traced to the graph
nodes it implements (Inductor's provenance) and judged by the bytes it moves against the least
those nodes must move.

- :mod:`fuseci.records.fusion`: the ledger's rows and totals, the provenance and kernel rows it is
  built from, and what changed node by node: the data every other part passes around.
- :mod:`.artifacts`: Inductor's captured artifacts, per compiled graph (and the caching choices
  the ledger relies on).
- :mod:`.wrapper`, :mod:`.graph`: the wrapper's calls and the post-grad graph, read as text.
- :mod:`.boundary`: the tensors crossing each call, its minimum bytes, the graph's floor.
- :mod:`.launches`: ncu's kernel rows and the call each belongs to.
- :mod:`.build`: the ledger from a capture and the rows; :mod:`.store`: its JSON.
- :mod:`.match`: which rows of two ledgers are the same work (nodes known by line and op).
- :mod:`.gate`: a ledger judged against its baseline's (:func:`.gate.judge`).
- :mod:`.diff`: what an upgrade changed, node by node (:func:`.diff.diff`).
"""
