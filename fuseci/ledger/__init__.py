"""The fusion ledger: every kernel of a ``torch.compile``'d model's forward, traced to the graph
nodes it implements (Inductor's provenance) and judged by the bytes it moves against the least
those nodes must move."""
