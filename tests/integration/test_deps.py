"""The declared dependency ranges hold the versions the suite is run with on each tested line
(requirements-lock.txt, which reads requirements-lock-py312.txt), so a range never claims a
version that was not tested, and no lock drifts outside it."""

import importlib.metadata
import os
import re
import sys
import tomllib

import pytest
from conftest import ROOT
from packaging.requirements import Requirement

LINES = ("3.11", "3.12")
"""The tested lines' Pythons (docs/get-started/install.md)."""


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lines(path: str):
    """The lock's pins and the files it reads (`-r FILE`), as `Requirement`s."""
    for line in open(os.path.join(ROOT, path), encoding="utf-8"):
        line = line.strip()
        if line.startswith("-r "):
            yield from _lines(line.split(None, 1)[1])
        elif line and not line.startswith("#"):
            yield Requirement(line)


def locked(python: str) -> dict[str, str]:
    """{name: version} the lock installs on `python`."""
    env = {"python_version": python, "sys_platform": "linux"}
    out = {}
    for req in _lines("requirements-lock.txt"):
        if req.marker is None or req.marker.evaluate(env):
            (spec,) = req.specifier
            assert spec.operator == "==", req
            assert _name(req.name) not in out, f"{req.name} pinned twice for Python {python}"
            out[_name(req.name)] = spec.version
    return out


@pytest.mark.parametrize("python", LINES)
def test_every_declared_range_holds_the_locked_version(python):
    project = tomllib.load(open(os.path.join(ROOT, "pyproject.toml"), "rb"))["project"]
    lock = locked(python)
    env = {"python_version": python, "sys_platform": "linux", "extra": "dev"}
    requirements = [Requirement(r) for r in project["dependencies"]]
    requirements += [Requirement(r) for r in project["optional-dependencies"]["dev"]]
    for req in requirements:
        if req.marker is not None and not req.marker.evaluate(env):
            continue  # not on this line (torch and SB3 on 3.12+)
        name = _name(req.name)
        assert name in lock, f"{req.name} is declared but not locked for Python {python}"
        assert req.specifier.contains(lock[name], prereleases=True), (python, str(req), lock[name])
        if req.name not in ("six", "pillow"):
            assert any(s.operator in ("<", "==") for s in req.specifier), \
                f"{req}: give an upper bound (the next release line), tested versions only"


def test_the_lines_differ_where_they_should():
    """Line 1 is JAX 0.10.2 with torch; line 2 JAX 0.12.0.1 with its CUDA compiler plugin of
    the same release, and no torch (no CPU build for 3.12+ on the package index)."""
    old, new = locked("3.11"), locked("3.12")
    assert old["jax"] == old["jaxlib"] == old["jax-cuda12-pjrt"] == "0.10.2"
    assert new["jax"] == new["jaxlib"] == new["jax-cuda12-pjrt"] == "0.12.0.1"
    assert "torch" in old and "torch" not in new and "stable-baselines3" not in new


VENV_OWN = {"pip", "setuptools"}
"""What `python -m venv` installs itself on 3.11 (`pip freeze` leaves them out)."""


def test_the_lock_holds_every_dependency_of_what_it_locks():
    """The lock is installed with `--no-deps`: every package a locked package requires (on this
    Python, no extra) must be locked too, or the install silently lacks it (mkdocs' yaml_env_tag
    was missing once). Read from the installed packages' own metadata."""
    python = ".".join(map(str, sys.version_info[:2]))
    lock = locked(python if python in LINES else LINES[-1])
    env = {"python_version": python, "sys_platform": sys.platform, "extra": ""}
    missing = {}
    for name in lock:
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here (another platform's)
        for text in requires:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            if _name(req.name) not in lock and _name(req.name) not in VENV_OWN:
                missing.setdefault(_name(req.name), name)
    assert not missing, f"required but not locked (by): {missing}"
