"""The conv torsos' layer stacks, as plain data: what `torsos.py` builds in Flax, and what the
SB3 side of `jaxppo compare` builds in torch (`compare/sb3.py`) in a process that imports no
JAX, so they live apart from the Flax code."""

CONV_STACKS: dict[str, tuple[tuple[int, int, int], ...]] = {
    "mlp": (),
    # MinAtar (Young & Tian 2019): one 3x3 layer of 16 filters over the 10x10xC grid.
    "cnn": ((16, 3, 1),),
    # DQN's "Nature" stack (Mnih et al. 2015), for 64x64 and larger images.
    "nature_cnn": ((32, 8, 4), (64, 4, 2), (64, 3, 1)),
}
"""Per torso, its conv layers as (filters, kernel, stride), VALID padding, then the flatten."""
TORSO_HIDDEN = {"nature_cnn": (512,)}  # a dense layer the stack itself ends with
PIXEL_TORSOS = ("nature_cnn",)
"""Torsos that read uint8 input as 0-255 pixels and scale it to [0, 1] (DQN's and CleanRL's
Atari convention). Other torsos take uint8 as numbers: xminigrid's and navix's symbolic grids
are small uint8 tile ids."""
