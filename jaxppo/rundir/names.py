"""Every name a run directory holds, in one place: the format modules beside this one own what
is in each file (and its version); everything else names a file only through these constants
(tests/unit/test_layers.py holds that rule)."""

CONFIG = "config.yaml"
RUN_ID = "run_id"
METRICS = "metrics.csv"
TB_DIR = "tb"
CHECKPOINT_DIR = "checkpoint"
CHECKPOINT = "checkpoint.msgpack"
SUMMARY = "summary.json"
CURVE = "curve.png"
EVAL = "eval.json"
EXPORT_DIR = "export"
SWEEP = "sweep.csv"
SWEEP_PNG = "sweep.png"
PBT = "pbt.csv"
HPARAMS = "hparams.csv"
PLAN = "static_sweep.json"
REPORT_DIR = "report"
LOCK = ".lock"

FILES = (CONFIG, RUN_ID, METRICS, CHECKPOINT, SUMMARY, CURVE, EVAL, SWEEP, SWEEP_PNG, PBT,
         HPARAMS, PLAN)
"""The file names no module outside `jaxppo/rundir/` writes as a literal."""
