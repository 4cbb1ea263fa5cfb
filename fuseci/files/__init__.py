"""The file edge, under everything that writes or reads a file: versioned documents, atomic
writes, locks and report outputs. It knows no format of fuseci's."""
