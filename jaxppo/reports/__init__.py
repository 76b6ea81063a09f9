"""`jaxppo report`: statistics over seeds (mean, median, IQM, optimality gap with bootstrap
intervals; curves, profiles) of run directories, into report.json and three PNGs.

`stats` is the pure statistics, `read` reads run directories into groups of scores,
`normalize` puts them on one scale, `build` puts the report together and writes it. Above
`jaxppo.run` (it reads what a run wrote). Code outside this package imports from here; the
modules inside import each other by full path, so nothing cycles through this face.
"""

from jaxppo.reports.build import Report, report
from jaxppo.reports.normalize import parse_normalize
from jaxppo.reports.read import Group, read_run
from jaxppo.reports.stats import (
    aggregate,
    interval_estimates,
    iqm,
    optimality_gap,
    percentile_interval,
    profile,
    stratified_resamples,
)

__all__ = [
    "Group",
    "Report",
    "aggregate",
    "interval_estimates",
    "iqm",
    "optimality_gap",
    "parse_normalize",
    "percentile_interval",
    "profile",
    "read_run",
    "report",
    "stratified_resamples",
]
