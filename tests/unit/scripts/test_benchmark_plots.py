"""scripts/benchmark_plots.py draws every figure the benchmark pages show, from data files that
say where and when their numbers were measured."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT as _ROOT

pytestmark = pytest.mark.unit

ROOT = Path(_ROOT)
PAGES = ROOT / "docs" / "benchmarks"
DATA = PAGES / "data"
IMAGE = re.compile(r"!\[[^\]]*\]\((img/[^)\s]+\.png)\)")


def referenced_images() -> set[str]:
    """`img/<name>.png` as the benchmark pages reference them."""
    names = set()
    for page in PAGES.glob("*.md"):
        names |= {m.group(1).removeprefix("img/") for m in IMAGE.finditer(page.read_text())}
    return names


def test_the_pages_reference_images():
    assert len(referenced_images()) >= 5


def test_script_writes_every_referenced_image(tmp_path):
    out = tmp_path / "img"
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark_plots.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    written = [Path(line) for line in proc.stdout.splitlines() if line.strip()]
    assert written and all(p.parent == out and p.is_file() for p in written), proc.stdout
    names = {p.name for p in written}
    assert len(names) == len(written)  # one line per file
    missing = referenced_images() - names
    assert not missing, f"referenced by the pages but not drawn: {sorted(missing)}"
    for p in written:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_committed_images_match_the_references():
    """The PNGs are committed too (the pages render on GitHub without the docs build)."""
    missing = [n for n in referenced_images() if not (PAGES / "img" / n).is_file()]
    assert not missing, f"run: python scripts/benchmark_plots.py ({missing})"


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda p: p.name)
def test_data_file_says_where_and_when(path):
    data = json.loads(path.read_text())
    for field in ("machine", "date", "command", "title"):
        assert isinstance(data.get(field), str) and data[field].strip(), f"{path.name}: {field}"
    assert (PAGES / data["page"]).is_file(), f"{path.name}: page {data['page']}"
    rows = data["rows"]
    assert rows
    if "columns" in data:
        assert all(len(r) == len(data["columns"]) for r in rows), path.name


def test_there_are_data_files():
    assert len(list(DATA.glob("*.json"))) >= 5
