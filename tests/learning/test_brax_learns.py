"""Learning on Brax: brax/inverted_double_pendulum through the CLI on the CPU, and its eval with
GIF and HTML rendering. Brax's specifics: tests/integration/test_brax.py."""

import csv
import glob
import os

import pytest

pytest.importorskip("brax")

from conftest import ROOT, compile_as_a_user  # noqa: E402

from jaxppo import load_config  # noqa: E402
from jaxppo.cli import main  # noqa: E402

IDP = "brax/inverted_double_pendulum"
IDP_CONFIG = os.path.join(ROOT, "configs", "brax_inverted_double_pendulum.yaml")


@pytest.fixture(scope="module")
def idp_run(tmp_path_factory):
    """The shipped config, through the CLI, with 72 updates (294,912 of its 1e6 steps; ~40 s on
    2 cores, most of it compiling Brax's physics): 72 updates split into equal chunks, so one
    chunk program compiles, not a second for a remainder."""
    logdir = tmp_path_factory.mktemp("brax")
    with pytest.MonkeyPatch.context() as mp:  # a learning run: compiled as a user's is
        compile_as_a_user(mp)
        code = main(["train", "--config", IDP_CONFIG, "--set", "total_timesteps=294912",
                     "--logdir", str(logdir), "--no-cache", "--no-progress"])
    assert code == 0
    (run_dir,) = glob.glob(os.path.join(str(logdir), "*"))
    return run_dir


@pytest.mark.slow
def test_inverted_double_pendulum_learns_on_cpu(idp_run):
    with open(os.path.join(idp_run, "metrics.csv")) as f:
        returns = [float(r["episodic_return"]) for r in csv.DictReader(f)]
    first, final = returns[0], returns[-1]
    # The first update's episodes are the random initial policy's (~110: the poles fall in
    # ~15 steps). A wide margin: at least 4x that, and 500 in absolute terms.
    assert final >= 4 * first and final >= 500, (first, final)
    cfg = load_config(os.path.join(idp_run, "config.yaml"))
    assert cfg.env_id == IDP and cfg.normalize_obs


@pytest.mark.slow
def test_eval_renders_gif_and_html(idp_run, tmp_path, capsys):
    from PIL import Image

    gif, html = str(tmp_path / "ep.gif"), str(tmp_path / "ep.html")
    capsys.readouterr()
    assert main(["eval", idp_run, "--episodes", "4", "--gif", gif, "--html", html,
                 "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {gif}" in out and f"wrote {html}" in out
    length = int(out.split(f"wrote {gif} (")[1].split(" steps")[0])
    assert length > 20  # the trained policy balances well past the random policy's ~15 steps
    img = Image.open(gif)
    assert img.n_frames >= length // 3
    text = open(html).read()
    assert "<html" in text.lower() and "brax" in text.lower()
