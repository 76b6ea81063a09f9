"""The pure pieces of `jaxppo compare`'s PyTorch systems (no torch needed): each library's
mapping of one config against hand-computed values, the system names and aliases, the "-"
reasons, the fairness band, and the figure's axis (linear, ratios on the bars)."""

import matplotlib.pyplot as plt
import pytest

from jaxppo import PPOConfig
from jaxppo.compare import mapping, systems
from jaxppo.compare.table import fairness, skipped_row, table_markdown
from jaxppo.errors import UsageError
from jaxppo.plots import compare_figure

pytestmark = pytest.mark.unit

# Every mapped field away from its default (as test_compare.ODD): 6 envs x 32 steps = 192 per
# rollout, 8 minibatches of 24, 576 steps = 3 updates.
ODD = PPOConfig(env_id="CartPole-v1", total_timesteps=3 * 6 * 32, num_envs=6, num_steps=32,
                update_epochs=3, num_minibatches=8, lr=7e-4, anneal_lr=True, gamma=0.97,
                gae_lambda=0.9, clip_eps=0.15, clip_vloss=False, ent_coef=0.02, vf_coef=0.7,
                max_grad_norm=0.8, target_kl=0.03, norm_adv=False, hidden_sizes=(24, 40),
                activation="relu", adam_eps=3e-6)


def test_tianshou_mapping_by_hand():
    m = mapping.tianshou_mapping(ODD)
    assert m.kwargs == {
        "algorithm": {"eps_clip": 0.15, "dual_clip": None, "value_clip": False,
                      "advantage_normalization": False, "recompute_advantage": False,
                      "vf_coef": pytest.approx(0.35), "ent_coef": 0.02, "max_grad_norm": 0.8,
                      "gae_lambda": 0.9, "gamma": 0.97, "max_batchsize": 24,
                      "return_scaling": False},
        "adam": {"lr": 7e-4, "eps": 3e-6}, "lr_updates": 3, "collect_steps": 192,
        "batch_size": 24, "repeat": 3, "num_envs": 6}
    assert m.cannot == ("target_kl=0.03 (Tianshou's PPO has no KL early stop)",)
    assert any("vf_coef x 0.5" in n for n in m.notes)


def test_torchrl_mapping_by_hand():
    m = mapping.torchrl_mapping(ODD)
    assert m.kwargs == {
        "loss": {"clip_epsilon": 0.15, "entropy_bonus": True, "entropy_coeff": 0.02,
                 "critic_coeff": pytest.approx(0.35), "loss_critic_type": "l2",
                 "normalize_advantage": False, "clip_value": None},
        "gae": {"gamma": 0.97, "lmbda": 0.9, "average_gae": False},
        "adam": {"lr": 7e-4, "eps": 3e-6}, "lr_updates": 3, "frames_per_batch": 192,
        "sub_batch_size": 24, "num_epochs": 3, "max_grad_norm": 0.8, "num_envs": 6}
    assert m.cannot == ("target_kl=0.03 (TorchRL's ClipPPOLoss has no KL early stop)",)


def test_torch_script_mapping_is_jaxppos_fields():
    m = mapping.torch_mapping(ODD)
    assert m.kwargs["minibatch_size"] == 24 and m.kwargs["num_updates"] == 3
    assert (m.kwargs["lr"], m.kwargs["adam_eps"], m.kwargs["target_kl"]) == (7e-4, 3e-6, 0.03)
    assert m.kwargs["hidden_sizes"] == (24, 40) and m.cannot == ()  # it has a KL stop


def test_clipping_and_normalisation_map_where_set():
    on = PPOConfig(clip_vloss=True, norm_adv=True, anneal_lr=False, ent_coef=0.0,
                   normalize_obs=True)
    ts, rl = mapping.tianshou_mapping(on), mapping.torchrl_mapping(on)
    assert ts.kwargs["algorithm"]["value_clip"] is True and ts.kwargs["lr_updates"] is None
    assert ts.kwargs["algorithm"]["advantage_normalization"] is True
    assert rl.kwargs["loss"]["clip_value"] == on.clip_eps and rl.kwargs["lr_updates"] is None
    assert rl.kwargs["loss"]["entropy_bonus"] is False
    for m in (ts, rl, mapping.torch_mapping(on)):  # named, never dropped silently
        assert any(c.startswith("normalize_obs") for c in m.cannot), m.cannot


def test_annealed_lr_factor_by_hand():
    assert [mapping.annealed_lr_factor(k, 4) for k in range(4)] == [1.0, 0.75, 0.5, 0.25]


def test_system_names_and_aliases():
    assert systems.resolve(["torch", "torch-compile", "tianshou", "torchrl"]) == (
        "torch-sync", "torch-compile-sync", "tianshou-subproc", "torchrl-parallel")
    assert systems.resolve(["torch", "torch-sync"]) == ("torch-sync",)  # each once
    for bad in (["pytorch"], []):
        with pytest.raises(UsageError, match="--systems: unknown"):
            systems.resolve(bad)
    assert all(systems.label(s, 4, 16) for s in systems.SYSTEMS)


def test_systems_without_a_twin_say_why():
    assert systems.unsupported("sb3-dummy", "atari", "nature_cnn") is None
    assert "EnvPool" in systems.unsupported("torch-sync", "atari", "nature_cnn")
    assert "MinAtar" in systems.unsupported("torchrl-serial", "minatar", "mlp")
    assert systems.unsupported("tianshou-dummy", "minatar", "mlp") is None
    assert "torso" in systems.unsupported("tianshou-dummy", "minatar", "cnn")
    row = skipped_row("torchrl-serial", ODD, 16, "TorchRL has no MinAtar env")
    md = table_markdown([row], [], "header")
    assert "| TorchRL SerialEnv (6 envs) | - |" in md
    assert "- TorchRL SerialEnv (6 envs): - (TorchRL has no MinAtar env)" in md


def _row(system, final, sps=1000.0):
    return {"system": system, "label": system, "final_return": final, "sps": sps,
            "solve_s": None, "has_threshold": True}


def test_fairness_flags_a_system_below_the_band():
    """CartPole (threshold 475): the band is 95 below the best final return (500)."""
    rows = [_row("jaxppo", 500.0), _row("sb3-dummy", 405.0), _row("torch-sync", 404.9),
            _row("tianshou-subproc", None)]
    notes = fairness(rows, 475.0)
    assert [r["band"] for r in rows] == ["ok", "ok", "OUT", "OUT"]
    assert len(notes) == 2 and "torch-sync: final return 404.9, below the band 405.0" in notes[0]
    assert "no episode ended" in notes[1]
    dip = [_row("jaxppo", 500.0), {**_row("torchrl-parallel", 300.0), "repeats": 3,
                                   "solved": "3/3"}, {**_row("torch-sync", 300.0),
                                                      "repeats": 3, "solved": "2/3"}]
    fairness(dip, 475.0)
    assert [r["band"] for r in dip] == ["ok", "ok (solved every repeat)", "OUT"]
    no_bar = [_row("jaxppo", 500.0), _row("torch-sync", 20.0)]
    assert fairness(no_bar, None) == [] and [r["band"] for r in no_bar] == ["-", "-"]


def test_compare_figure_is_linear_with_ratios_on_the_bars():
    """Today's log axis drew 2.2x like 20x: the axis is linear and each bar says its ratio."""
    rows = [{**_row("sb3-dummy", 500.0, 1000.0), "label": "SB3"},
            {**_row("jaxppo", 500.0, 2200.0), "label": "jaxppo"}]
    fig = compare_figure(rows, "t")
    try:
        ax = fig.axes[0]
        assert ax.get_xscale() == "linear"
        texts = [t.get_text() for t in ax.texts]
        assert " 2,200 (2.2x)" in texts and " 1,000 (1.0x)" in texts
        widths = sorted(p.get_width() for p in ax.patches)
        assert widths[1] / widths[0] == pytest.approx(2.2)  # bar lengths as the numbers
    finally:
        plt.close(fig)
