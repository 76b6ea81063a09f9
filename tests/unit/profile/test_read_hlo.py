"""Reading optimized HLO (`jaxppo.profile.read_hlo`): kernels, copies and bytes per loop on a
hand-made module. The `jaxppo profile` command: tests/integration/test_profile.py."""

import subprocess
import sys

import pytest
from conftest import ROOT

from jaxppo.profile import per_update, read_hlo

HLO = """HloModule m
%dus (a: f32[64], u: f32[2], i: s32[]) -> f32[64] {
  %a = f32[64] parameter(0)
  %u = f32[2] parameter(1)
  %i = s32[] parameter(2)
  ROOT %d = f32[64] dynamic-update-slice(%a, %u, %i)
}
%body (p: (s32[], f32[2])) -> (s32[], f32[2]) {
  %p = (s32[], f32[2]) parameter(0)
  %a = f32[2] fusion(%p), kind=kLoop
  %b = f32[2] copy(%a)
  %c = f32[64] fusion(%b, %b), kind=kLoop, calls=%dus
  ROOT %t = (s32[], f32[2]) tuple(%p, %c)
}
%cond (p: (s32[], f32[2])) -> pred[] {
  %p = (s32[], f32[2]) parameter(0)
  ROOT %lt = pred[] constant(true)
}
ENTRY %main (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  %w = (s32[], f32[2]) while(%x), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"4"}}
  ROOT %y = f32[2] sort(%x), dimensions={0}
}
"""


def cli(*argv):
    return subprocess.run([sys.executable, "-m", "jaxppo.cli", *argv], capture_output=True,
                          text=True, cwd=ROOT, timeout=900)


@pytest.mark.unit
def test_read_hlo_counts_kernels_per_loop_by_trip_count():
    """3 kernels x 4 trips + 1 outside = 13, of which 4 copies; bytes written (an in-place
    update writes its update only)."""
    prof = read_hlo(HLO)
    assert [(lp.depth, lp.trips, lp.kernels, lp.executions, lp.copies) for lp in prof.loops] \
        == [(0, 4, 3, 12, 4)]
    assert prof.kernels == 13 and prof.by_op["copy"] == 4
    assert prof.bytes == 4 * (8 + 8 + 8) + 8  # the fusion, the copy, the 2-float update; sort
    assert per_update(prof) == {"kernels": 3, "copies": 1, "bytes": 24, "updates": 4}
