"""metrics.csv's reader's old home: `jaxppo.rundir.metrics_csv` owns the format now; these
names are kept for code that imports them from here (as the docs showed before 0.2)."""

from jaxppo.rundir.metrics_csv import CSV_HEADER, forward_fill, read_metrics_csv

__all__ = ["CSV_HEADER", "forward_fill", "read_metrics_csv"]
