"""Trained agents out of a run directory: `load_policy` to act, `evaluate` for every agent's
returns on fixed episodes, GIFs and Brax's viewer (`render`), `export_policy` to run one
without jaxppo (ONNX, `jax.export`). Agents that diverged are named and not played (`diverged`)."""

from jaxppo.policy.diverged import DivergedAgent
from jaxppo.policy.evaluate import EvalResult, evaluate
from jaxppo.policy.export import ExportResult, export_policy
from jaxppo.policy.policy import Policy, load_policy

__all__ = ["DivergedAgent", "EvalResult", "ExportResult", "Policy", "evaluate", "export_policy",
           "load_policy"]
