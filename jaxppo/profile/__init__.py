"""The deviceless profile: how many kernels a config's compiled program runs per update, on this
CPU or on a GPU this machine does not have (`jaxppo profile`, docs/how-to/gpu.md)."""

from jaxppo.profile.gpu import GPUS, ask_for_cuda_compiles, compiled_text, gpu_device
from jaxppo.profile.hlo import Loop, Profile, loop_table, per_update, read_hlo
from jaxppo.profile.programs import PARTS, TARGETS, ProgramProfile, as_users_run, profile_config

__all__ = ["GPUS", "PARTS", "TARGETS", "Loop", "Profile", "ProgramProfile",
           "as_users_run", "ask_for_cuda_compiles", "compiled_text", "gpu_device", "loop_table", "per_update",
           "profile_config", "read_hlo"]
