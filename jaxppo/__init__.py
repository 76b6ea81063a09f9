"""jaxppo: PPO whose whole training run compiles into one `jax.lax.scan`.

    import jax, jaxppo
    config = jaxppo.load_config("configs/cartpole.yaml")
    result = jaxppo.Experiment(config, seeds=8).run()          # logged, checkpointed, resumable
    out = jax.jit(jax.vmap(jaxppo.make_train(config)))(jax.random.split(jax.random.key(0), 8))
"""

from jaxppo.process import hold_signals

hold_signals()  # the jaxppo command's Ctrl-C during these imports: one line from its main()

from jaxppo._xla import apply_xla_cpu_flags, quiet_cuda_plugins  # noqa: E402

apply_xla_cpu_flags()  # before anything creates the CPU backend
quiet_cuda_plugins()  # the gpu-profile extra's CUDA plugin, where it can do nothing

from jaxppo.config import Hparams, PPOConfig, load_config  # noqa: E402
from jaxppo.core.gae import compute_gae  # noqa: E402
from jaxppo.core.train import Trainer, TrainOutput, TrainState, make_train  # noqa: E402
from jaxppo.envs import VecEnv, register_env  # noqa: E402
from jaxppo.errors import CheckpointError, ConfigError, UsageError  # noqa: E402
from jaxppo.policy import (  # noqa: E402
    EvalResult,
    ExportResult,
    Policy,
    evaluate,
    export_policy,
    load_policy,
)
from jaxppo.profile import ProgramProfile, profile_config  # noqa: E402
from jaxppo.reports import Report, report  # noqa: E402
from jaxppo.run.callbacks import Checkpointer, Progress, StopAtReturn  # noqa: E402
from jaxppo.run.distributed import init_distributed, make_mesh  # noqa: E402
from jaxppo.run.events import Callback, ChunkEvent, RunInfo, RunResult  # noqa: E402
from jaxppo.run.experiment import Experiment  # noqa: E402
from jaxppo.run.logs.csv_logger import CsvLogger  # noqa: E402
from jaxppo.run.logs.tensorboard import TensorBoardLogger  # noqa: E402
from jaxppo.run.logs.wandb import WandbLogger  # noqa: E402
from jaxppo.run.memory import MemoryEstimate, estimate_memory  # noqa: E402
from jaxppo.run.placement import MeshPlacement, ShardedTrain, make_sharded_train  # noqa: E402
from jaxppo.rundir.checkpoint import Checkpoint, load_checkpoint  # noqa: E402
from jaxppo.rundir.reader import AgentStatus, RunDir  # noqa: E402
from jaxppo.search import SweepResult  # noqa: E402
from jaxppo.search.sweep import resume_sweep, sweep  # noqa: E402

__all__ = [
    "AgentStatus",
    "Callback",
    "Checkpoint",
    "CheckpointError",
    "Checkpointer",
    "ChunkEvent",
    "ConfigError",
    "EvalResult",
    "ExportResult",
    "CsvLogger",
    "Experiment",
    "Hparams",
    "MemoryEstimate",
    "MeshPlacement",
    "PPOConfig",
    "Policy",
    "ProgramProfile",
    "Progress",
    "Report",
    "RunDir",
    "RunInfo",
    "RunResult",
    "ShardedTrain",
    "StopAtReturn",
    "SweepResult",
    "TensorBoardLogger",
    "TrainOutput",
    "TrainState",
    "Trainer",
    "UsageError",
    "VecEnv",
    "WandbLogger",
    "compute_gae",
    "estimate_memory",
    "evaluate",
    "export_policy",
    "init_distributed",
    "load_checkpoint",
    "load_config",
    "load_policy",
    "make_mesh",
    "make_sharded_train",
    "make_train",
    "profile_config",
    "register_env",
    "report",
    "resume_sweep",
    "sweep",
]
__version__ = "0.2.0"
