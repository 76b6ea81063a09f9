"""jaxppo: PPO whose whole training run compiles into one `jax.lax.scan`.

    from jaxppo import PPOConfig, make_train
    train = make_train(PPOConfig(env_id="CartPole-v1"))
    out = jax.jit(jax.vmap(train))(jax.random.split(jax.random.key(0), 8))
"""

from jaxppo._xla import apply_xla_cpu_flags

apply_xla_cpu_flags()  # before anything creates the CPU backend

from jaxppo.checkpoint import Checkpoint, CheckpointError, load_checkpoint  # noqa: E402
from jaxppo.config import ConfigError, Hparams, PPOConfig, load_config  # noqa: E402
from jaxppo.gae import compute_gae  # noqa: E402
from jaxppo.memory import MemoryEstimate, estimate_memory  # noqa: E402
from jaxppo.sharding import ShardedTrain, make_mesh, make_sharded_train  # noqa: E402
from jaxppo.train import TrainOutput, TrainState, make_train  # noqa: E402

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "ConfigError",
    "Hparams",
    "MemoryEstimate",
    "PPOConfig",
    "ShardedTrain",
    "TrainOutput",
    "TrainState",
    "compute_gae",
    "estimate_memory",
    "load_checkpoint",
    "load_config",
    "make_mesh",
    "make_sharded_train",
    "make_train",
]
__version__ = "0.1.0"
