"""Sweeps that search: spaces and draws (`space`), grids (`table`), static settings
(`static`, `static_sweep`), successive halving (`halving`), population-based training
(`pbt`), the one table of strategies (`strategies`) and the entry points `sweep` and
`resume_sweep` (`sweep`). Everything here sits above one run (`jaxppo.run`) and changes a
running population only through its `Controller` protocol."""

from jaxppo.search.halving import halving_search, rung_ends, rung_sizes, select
from jaxppo.search.pbt import PBTController, pbt_search
from jaxppo.search.space import check_space, draw_settings, parse_space, random_search, space_record
from jaxppo.search.strategies import OPTIONS, STRATEGIES
from jaxppo.search.table import SweepResult, grid_settings, parse_grid

__all__ = ["OPTIONS", "PBTController", "STRATEGIES", "SweepResult", "check_space",
           "draw_settings", "grid_settings", "halving_search", "parse_grid", "parse_space",
           "pbt_search", "random_search", "rung_ends", "rung_sizes", "select", "space_record"]
