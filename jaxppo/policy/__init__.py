"""Trained agents out of a run directory: `load_policy` to act, `evaluate` for every agent's
returns on fixed episodes, GIFs and Brax's viewer (`render`). Agents that diverged are named
and not played (`diverged`)."""

from jaxppo.policy.diverged import DivergedAgent
from jaxppo.policy.evaluate import EvalResult, evaluate
from jaxppo.policy.policy import Policy, load_policy

__all__ = ["DivergedAgent", "EvalResult", "Policy", "evaluate", "load_policy"]
