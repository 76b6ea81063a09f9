"""What a command imports before it answers: a typo'd env id is answered from the ids jaxppo
knows, without importing any env suite (Brax's MJX, Jumanji, navix's agents and W&B took ~6 s of
CPU per typo), and gymnax's render-only seaborn import (with pandas and scipy.stats) waits until
something uses it, as does matplotlib's pyplot (~0.3 s) until a figure is drawn. Each check
runs in a fresh interpreter: what it imports is the point."""

import importlib.util
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

from jaxppo.envs.sources import brax as brax_source
from jaxppo.envs.sources import jumanji as jumanji_source

HEAVY = ("brax", "mujoco", "jumanji", "navix", "wandb", "pandas", "scipy.stats", "envpool",
         "xminigrid", "seaborn")


def _fresh(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_a_typod_env_id_is_answered_without_importing_a_suite():
    out = _fresh(f"""
        import sys
        from jaxppo.cli import main
        code = main(["train", "--config", "configs/cartpole.yaml", "--set", "env_id=CartPoleX-v9",
                     "--no-progress"])
        print(code, sorted(m for m in {HEAVY!r} if m in sys.modules))
    """)
    assert out.split("\n")[-2] == "2 []", out


@pytest.mark.parametrize("typo, hint", [("Hopper-v4", "brax/hopper"), ("Snake-v1", "jumanji/Snake-v1"),
                                        ("InvertedDoublePendulum", "brax/inverted_double_pendulum")])
def test_a_suite_id_typed_bare_is_still_pointed_at(typo, hint, capsys):
    from jaxppo.cli import main

    assert main(["train", "--config", "configs/cartpole.yaml", "--set", f"env_id={typo}",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{hint!r}" in err[0], err


def test_gymnax_imports_no_seaborn_until_it_is_used_and_then_it_works():
    """jaxppo imports gymnax with seaborn deferred: gymnax's Pong holds a stand-in that loads
    seaborn at its render; a user's own seaborn is the real module, in every import form."""
    pytest.importorskip("seaborn")
    out = _fresh("""
        import sys
        import jaxppo
        jaxppo.VecEnv("CartPole-v1", 2)             # gymnax, imported by jaxppo
        print("gymnax" in sys.modules, "pandas" in sys.modules, "seaborn" in sys.modules)
        from seaborn import *                       # a user's own seaborn, as usual
        import seaborn as sns
        print(callable(lineplot), type(sns).__name__, sys.modules["seaborn"] is sns)
        import gymnax.environments.misc.pong as pong  # gymnax's render still finds seaborn
        print(len(pong.sns.color_palette("cubehelix", 3)))
    """)
    assert out.split("\n")[-4:] == ["True False False", "True module True", "3", ""], out


def test_matplotlib_waits_for_the_first_figure_which_is_drawn_headless(tmp_path):
    """`import jaxppo` and the CLI import no matplotlib (most commands draw nothing); the first
    figure imports pyplot under the Agg backend and is written whole."""
    png = tmp_path / "curve.png"
    out = _fresh(f"""
        import sys
        import numpy as np
        import jaxppo, jaxppo.cli
        print("matplotlib" in sys.modules)
        from jaxppo.plots import plot_curve
        plot_curve({str(png)!r}, np.arange(1, 5) * 64.0, np.arange(4.0)[None], "CartPole-v1")
        import matplotlib
        print(matplotlib.get_backend())
    """)
    assert out.lower().split() == ["false", "agg"], out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_names_jaxppo_knows_are_the_suites_own():
    """The static names the suggestions use, held to each suite's registry where installed."""
    if importlib.util.find_spec("brax") is not None:
        from brax import envs

        assert brax_source.BRAX_NAMES == set(envs._envs) - {"fast"}  # noqa: SLF001
    if importlib.util.find_spec("jumanji") is not None:
        import jumanji

        assert set(jumanji_source.NAMES) == set(jumanji.registered_environments())


def test_start_up_counts_from_jaxppos_own_start_not_the_process_start():
    """A shell that ran other work, then exec'd jaxppo in the same process (`bash -c "pip
    install ... && jaxppo train ..."`): start-up counted the pip install (196.9 s). The
    command's clock starts once jaxppo's code runs: after `t0`, taken before its import, and
    never at the process's start, 2 s of sleep earlier."""
    code = ("import sys, time; t0 = time.perf_counter(); sys.argv[0] = 'jaxppo'; "
            "from jaxppo.process import command_started, is_command; "
            "print(is_command(), command_started() >= t0)")
    out = subprocess.run(["bash", "-c", f'sleep 2; exec "{sys.executable}" -c "{code}"'],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True"], out.stdout
