"""Compile-cache trouble is one note per command naming the cache and the fix, not JAX's
warnings per program (16 lines a run): a cache that cannot be written (a full or read-only
disk) and an entry that cannot be read (a directory); an entry jaxppo did not write is
never handed to XLA (issue #54, item 8)."""

import hashlib
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT
from faults_setup import CARTPOLE, TINY

from jaxppo._xla import ZSTD_MAGIC, _jax_cache, _jax_lru, setup_compilation_cache, take_damaged_cache_entries

pytestmark = pytest.mark.usefixtures("compile_cache")

READ_ONLY = """import os, sys
import jax._src.lru_cache as lru
def refuse(self, data):  # a read-only cache disk (root ignores chmod: the OS's error itself)
    raise OSError(30, os.strerror(30), str(self))
lru.pathlib.Path.write_bytes = refuse
from jaxppo.cli import main
sys.exit(main(sys.argv[1:]))
"""


def train(tmp_path, cache, name, script=None):
    env = {**os.environ, "JAXPPO_CACHE_DIR": str(cache)}
    head = [sys.executable, str(script)] if script else [sys.executable, "-m", "jaxppo.cli"]
    p = subprocess.run([*head, "train", "--config", CARTPOLE, *TINY, "--logdir",
                        str(tmp_path), "--run-name", name, "--no-progress"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stderr.strip().splitlines()


@pytest.fixture(scope="module")
def first_cache(tmp_path_factory):
    """The compile cache one first run left (its entries and jaxppo's digests), with no note,
    and a copy of it kept whole: each test below damages the cache after `cache_restored`
    (at its own path: JAX's keys hold the cache's path, so a copy elsewhere would miss)."""
    base = tmp_path_factory.mktemp("first")
    err = train(base, base / "cache", "first")
    assert not [x for x in err if "compile cache" in x], err
    assert sorted(base.joinpath("cache").glob("*-cache"))
    shutil.copytree(base / "cache", base / "whole")
    return base / "cache"


def cache_restored(first_cache):
    shutil.rmtree(first_cache)
    shutil.copytree(first_cache.parent / "whole", first_cache)
    return first_cache


def test_a_cache_that_cannot_be_written_is_one_note(tmp_path):
    """Reproduction: a read-only (or full) cache disk gave JAX's 'Error writing persistent
    compilation cache entry' warning for every program of every run."""
    script = tmp_path / "ro.py"
    script.write_text(READ_ONLY)
    cache = tmp_path / "cache"
    err = train(tmp_path, cache, "r", script)
    assert not [x for x in err if "Error writing" in x or "Warning" in x], err
    notes = [x for x in err if "compile cache" in x]
    assert len(notes) == 1, err
    assert f"the compile cache {cache} could not be written (Read-only file system" in notes[0]
    assert "remount it writable" in notes[0] and "--no-cache" in notes[0]
    assert not list(cache.glob("*-cache"))  # no half entry left


def test_an_entry_that_is_a_directory_is_one_note(first_cache, tmp_path):
    cache = cache_restored(first_cache)
    entries = sorted(cache.glob("*-cache"))
    for f in entries:
        f.unlink()
        f.mkdir()
    err = train(tmp_path, cache, "second")
    assert not [x for x in err if "Error reading" in x], err
    notes = [x for x in err if "compile cache" in x]
    assert len(notes) == 1 and "could not be read" in notes[0] and "remove it" in notes[0], err


def test_an_entry_jaxppo_did_not_write_is_never_run(first_cache, tmp_path):
    """Reproduction: a hand-made entry whose code is damaged but decompresses (JAX checks
    nothing more) was handed to XLA, which crashed the process (a segfault)."""
    cache = cache_restored(first_cache)
    entries = sorted(cache.glob("*-cache"))
    assert entries and all(os.path.exists(f"{f}.jaxppo-sha256") for f in entries)
    for f in entries:
        code, secs = _jax_cache.extract_executable_and_time(
            _jax_cache.decompress_executable(f.read_bytes()))
        damaged = bytes(b ^ 0x5A for b in code[:len(code) // 2]) + code[len(code) // 2:]
        f.write_bytes(_jax_cache.compress_executable(
            _jax_cache.combine_executable_and_time(damaged, secs)))
    err = train(tmp_path, cache, "second")
    notes = [x for x in err if "compile cache" in x]
    assert len(notes) == 1 and f"{len(entries)} entries" in notes[0], err
    assert "had no digest jaxppo wrote" in notes[0] and "removed unrun" in notes[0]
    assert not [x for x in err if "Error reading" in x], err
    assert "compile cache" not in " ".join(train(tmp_path, cache, "third"))  # whole again


def test_a_cut_short_compile_cache_entry_is_removed_and_written_again(first_cache, tmp_path):
    """JAX writes a compile-cache entry in place and never rewrites a key whose file exists:
    an entry cut short (kill -9 while it was written, a full disk) failed to read in every
    later run, with JAX's warning per program and a compile each time. Now it is removed and
    compiled again, in one note, and the entries are whole for the next run."""
    cache = cache_restored(first_cache)
    entries = sorted(cache.glob("*-cache"))
    for f in entries:
        f.write_bytes(f.read_bytes()[:f.stat().st_size // 2])
    err = train(tmp_path, cache, "second")
    assert not [x for x in err if "Error reading persistent compilation cache" in x], err
    assert [line for line in err if "compile cache" in line] == [
        f"jaxppo train: note: {len(entries)} entries of the compile cache {cache} could not be "
        "read (cut short by a kill or a full disk, or still being written by another process): "
        "removed, and compiled again"]
    for f in entries:
        _jax_cache.decompress_executable(f.read_bytes())  # whole again: raises on a cut stream


def test_only_a_cut_entry_of_this_jaxs_codec_is_removed_from_the_compile_cache(tmp_path):
    """An entry of another codec is another JAX's in a shared cache (on Python 3.14 JAX
    compresses with zstd under a key that says zlib) and is left to JAX; one of this JAX's
    codec cut short, or empty, is removed and reads as a miss."""
    setup_compilation_cache()
    cache = _jax_lru.LRUCache(str(tmp_path), max_size=-1)
    whole = _jax_cache.compress_executable(b"an executable" * 100)
    zstd = whole[:4] == ZSTD_MAGIC
    other = (b"\x78\x9c" if zstd else ZSTD_MAGIC) + b"\x01" * 40  # the other codec's header
    entries = {"whole": whole, "cut": whole[:len(whole) // 2], "empty": b"", "other": other}
    for key, value in entries.items():
        (tmp_path / f"{key}-cache").write_bytes(value)
    # the digest jaxppo writes beside its own entries (an entry without one is never run)
    (tmp_path / "whole-cache.jaxppo-sha256").write_text(hashlib.sha256(whole).hexdigest())
    take_damaged_cache_entries()
    got = {key: cache.get(key) for key in entries}
    assert got == {"whole": whole, "cut": None, "empty": None, "other": other}
    assert sorted(os.listdir(tmp_path)) == ["other-cache", "whole-cache",
                                            "whole-cache.jaxppo-sha256"]
    assert sorted(map(os.path.basename, take_damaged_cache_entries())) == ["cut-cache",
                                                                          "empty-cache"]
