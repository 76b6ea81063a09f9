"""Sweeps that search: spaces and draws (`space`), successive halving (`halving`),
population-based training (`pbt`), the ranked table (`table`), and the `sweep` entry point
(`jaxppo.search.sweep`, which sits above `Experiment` and so is not imported here)."""

from jaxppo.search.halving import halving_search, rung_ends, rung_sizes, select
from jaxppo.search.pbt import PBTController, pbt_search
from jaxppo.search.space import check_space, draw_settings, parse_space, random_search, space_record
from jaxppo.search.table import SweepResult, SweepTable, grid_settings, parse_grid, rank_settings, sweep_rows

__all__ = ["PBTController", "SweepResult", "SweepTable", "check_space", "draw_settings",
           "grid_settings", "halving_search", "parse_grid", "parse_space", "pbt_search",
           "random_search", "rank_settings", "rung_ends", "rung_sizes", "select", "space_record",
           "sweep_rows"]
