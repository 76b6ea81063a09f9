"""Sweeps that search: a space of float hyperparameters and the settings drawn from it."""

from jaxppo.search.space import check_space, draw_settings, parse_space, random_search, space_record

__all__ = ["check_space", "draw_settings", "parse_space", "random_search", "space_record"]
