"""What crosses a process or a package, declared once as typed documents validated where they
enter: the harness record, the trial record, the fusion ledger and SASS summaries."""
