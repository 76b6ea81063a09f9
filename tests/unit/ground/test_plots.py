"""The comparison plot, with and without a system that solved the env."""

import matplotlib.pyplot as plt
import pytest

from jaxppo.plots import compare_figure, plot_compare

pytestmark = pytest.mark.unit

UNSOLVED = [{"label": "jaxppo", "sps": 2.0e5, "solve_s": None},
            {"label": "sb3-dummy", "sps": 1.5e3, "solve_s": None}]
ONE_SOLVED = [{**UNSOLVED[0], "solve_s": 12.5}, UNSOLVED[1]]
NO_THRESHOLD = [{**r, "has_threshold": False} for r in UNSOLVED]  # MinAtar, Atari: no bar
OLD_NO_THRESHOLD = [{**r, "solved": "-"} for r in UNSOLVED]  # rows from before has_threshold


@pytest.mark.parametrize("rows,panels,says", [(UNSOLVED, 1, "no system solved"),
                                              (ONE_SOLVED, 2, None),
                                              (NO_THRESHOLD, 1, "no solve threshold"),
                                              (OLD_NO_THRESHOLD, 1, "no solve threshold")])
def test_compare_plot_drops_the_solve_panel_when_nothing_solved(tmp_path, rows, panels, says):
    path = tmp_path / "compare.png"
    plot_compare(str(path), rows, "CartPole-v1")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = compare_figure(rows, "CartPole-v1")
    try:
        assert len(fig.axes) == panels
        title = fig.get_suptitle()
        assert ("no system solved" in title) == (says == "no system solved")
        assert ("no solve threshold" in title) == (says == "no solve threshold")
    finally:
        plt.close(fig)


def test_a_return_curve_carries_only_over_updates_without_episodes():
    """Before the first episode there is no return (NaN, never 0.0); an update without an
    episode (an empty CSV cell) carries the last return; a NaN logged where episodes did end
    (a diverged run) is not hidden behind the last good return."""
    import numpy as np

    from jaxppo.rundir.metrics_csv import forward_fill

    nan = np.nan
    returns = np.array([[nan, 5.0, nan, 7.0, nan], [nan, 3.0, nan, nan, nan]])
    episodes = np.array([[0, 2, 0, 1, 0], [0, 1, 0, 4, 0]])
    np.testing.assert_array_equal(forward_fill(returns, episodes),
                                  [[nan, 5.0, 5.0, 7.0, 7.0], [nan, 3.0, 3.0, nan, nan]])
