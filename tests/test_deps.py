"""The declared dependency ranges hold the versions the suite is run with (requirements-lock.txt),
so a range never claims a version that was not tested, and the lock never drifts outside it."""

import os
import re
import tomllib

from packaging.requirements import Requirement

ROOT = os.path.dirname(os.path.dirname(__file__))


def locked() -> dict[str, str]:
    out = {}
    for line in open(os.path.join(ROOT, "requirements-lock.txt"), encoding="utf-8"):
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


def test_every_declared_range_holds_the_locked_version():
    project = tomllib.load(open(os.path.join(ROOT, "pyproject.toml"), "rb"))["project"]
    lock = locked()
    requirements = [Requirement(r) for r in project["dependencies"]]
    requirements += [Requirement(r) for r in project["optional-dependencies"]["dev"]]
    for req in requirements:
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        assert name in lock, f"{req.name} is declared but not in requirements-lock.txt"
        assert req.specifier.contains(lock[name], prereleases=True), (str(req), lock[name])
        if req.name not in ("six", "pillow"):
            assert any(s.operator in ("<", "==") for s in req.specifier), \
                f"{req}: give an upper bound (the next release line), tested versions only"
