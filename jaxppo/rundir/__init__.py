"""The run directory: one module per file it holds (its name, its version, how it is read,
written and upgraded from older layouts), one auditor of the append-only CSVs held against the
checkpoint, and `RunDir`, the one reader of a run directory's facts. Sits between the compiled
core and a run's host side: it imports nothing from `run/`, `search/` or above."""
