"""The scale a report's scores are on: raw returns, or each env's returns min-max normalised
to its references (`--normalize ENV=LOW,HIGH`: LOW -> 0, HIGH -> 1), needed when runs of
different envs are aggregated; and the optimality gap's threshold on that scale.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from jaxppo.errors import UsageError
from jaxppo.run.stats import solve_threshold


def parse_normalize(items: Sequence[str]) -> dict[str, tuple[float, float]] | str | None:
    """`--normalize` values: `ENV=LOW,HIGH` (repeatable) or the one word `raw`."""
    if not items:
        return None
    if list(items) == ["raw"]:
        return "raw"
    if "raw" in items:
        raise UsageError("--normalize raw cannot be given with --normalize ENV=LOW,HIGH: raw "
                         "aggregates the returns as they are, ENV=LOW,HIGH rescales each env's; "
                         "give one or the other")
    refs = {}
    for item in items:
        env, sep, rest = item.rpartition("=")
        try:
            low, high = (float(v) for v in rest.split(","))
        except ValueError:
            low = high = math.nan
        if not sep or not env or not (math.isfinite(low) and math.isfinite(high)) or low == high:
            raise UsageError(f"--normalize {item!r}: give ENV=LOW,HIGH (two different numbers: "
                             "the reference returns that become 0 and 1, e.g. "
                             "CartPole-v1=22,500), or the one word raw")
        refs[env] = (low, high)
    return refs


def check_normalize(env_ids: list[str], normalize) -> None:
    """Refuse, before anything is written, a mix of envs with no common scale and references
    that are malformed, missing for an env, or for an env no run trained on."""
    envs = sorted(set(env_ids))
    if normalize is None and len(envs) > 1:
        raise UsageError(f"these runs trained on {len(envs)} envs ({', '.join(envs)}), whose "
                         "returns are on different scales: give each env's reference returns "
                         "with --normalize ENV=LOW,HIGH (Python: normalize={env: (low, high)}), "
                         "or --normalize raw to aggregate the raw returns anyway")
    if isinstance(normalize, dict):
        for env, ref in normalize.items():
            ok = (isinstance(ref, (tuple, list)) and len(ref) == 2
                  and all(isinstance(v, numbers.Real) and math.isfinite(v) for v in ref))
            if not ok or ref[0] == ref[1]:
                raise UsageError(f"normalize[{env!r}] = {ref!r}: give (low, high), two different "
                                 "finite returns that become 0 and 1")
        missing = [e for e in envs if e not in normalize]
        unused = [e for e in normalize if e not in envs]
        if missing or unused:
            what = (f"has no reference for {', '.join(missing)}" if missing
                    else f"names {', '.join(unused)}, which no run trained on")
            raise UsageError(f"--normalize {what} (the runs' envs: {', '.join(envs)}); give "
                             "ENV=LOW,HIGH once for each of them")
    elif normalize not in (None, "raw"):
        raise UsageError(f"normalize={normalize!r}: give {{env_id: (low, high)}}, 'raw' or None")


def score_scale(env_id: str, normalize) -> tuple[float, float]:
    """(offset, width) that map an env's raw returns to its scores: (raw - offset) / width."""
    if isinstance(normalize, dict):
        low, high = normalize[env_id]
        return low, high - low
    return 0.0, 1.0


def gap_threshold_for(envs: set[str], normalize, gap_threshold: float | None) -> float | None:
    """The optimality gap's gamma for scores of `envs`: the one given, else 1 on a normalised
    scale, else the env's solve threshold; None where runs of different envs share no threshold."""
    if gap_threshold is not None:
        return float(gap_threshold)
    if isinstance(normalize, dict):
        return 1.0
    if len(envs) == 1:
        return solve_threshold(next(iter(envs)))
    return None


__all__ = ["check_normalize", "gap_threshold_for", "parse_normalize", "score_scale"]
