"""The small figure defects a new user met: a 1-seed curve.png showed a "± 1 std" legend entry
with no band, and a report's titles (every env and source named) ran past the figure's edges,
cut off in the PNG. Each figure is checked as drawn, before it is written."""

import numpy as np
import pytest
from conftest import make_run
from matplotlib.collections import PolyCollection

import jaxppo.plots as plots
from jaxppo import report

pytestmark = pytest.mark.unit


@pytest.fixture
def drawn(monkeypatch):
    """Each figure a plot function saves, drawn (its texts laid out), by path."""
    figures = {}

    def keep(fig, path, **kw):
        fig.canvas.draw()
        figures[str(path)] = fig

    monkeypatch.setattr(plots, "save_figure", keep)
    return figures


@pytest.mark.parametrize("seeds,band", [(1, False), (3, True)])
def test_a_curve_has_a_std_band_and_its_legend_entry_only_with_several_seeds(drawn, seeds,
                                                                              band):
    returns = np.arange(10.0)[None] + np.arange(seeds)[:, None]
    plots.plot_curve("c.png", np.arange(10) * 100, returns, "CartPole-v1", threshold=5.0)
    ax = drawn["c.png"].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert ("± 1 std" in labels) is band, labels
    assert any(isinstance(c, PolyCollection) for c in ax.collections) is band
    assert labels[0] == ("1 seed" if seeds == 1 else f"mean over {seeds} seeds")


def test_report_titles_stay_inside_their_figures(tmp_path, drawn):
    ids = ["gymnasium/keydoor_envs:KeyDoorLongName-v0", "Breakout-MinAtar",
           "gymnasium/LunarLander-v3", "envpool/MontezumaRevenge-v5"]
    runs = [make_run(tmp_path / f"r{i}", env_id=e, final=(1.0, 2.0)) for i, e in enumerate(ids)]
    report(runs, tmp_path / "out", reps=50, normalize={e: (0.0, 1.0) for e in ids})
    assert len(drawn) == 3, drawn
    for path, fig in drawn.items():
        renderer = fig.canvas.get_renderer()
        titles = [fig._suptitle, *(ax.title for ax in fig.axes)]
        for t in (t for t in titles if t is not None and t.get_text()):
            box = t.get_window_extent(renderer)
            assert box.x0 >= 0 and box.x1 <= fig.bbox.width, (path, t.get_text())
        shown = " ".join(t.get_text() for t in titles if t is not None)
        assert "KeyDoorLongName-v0" in shown, (path, shown)  # wrapped whole, not cut
