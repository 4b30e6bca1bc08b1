"""How ``make test`` spreads the suite over its workers (``pytest -n 2 --dist loadgroup``): the
hook tests/conftest.py takes, kept here so that a test can load it alone (test_suite_groups)."""
from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups (it names them in the node ids)
def pytest_collection_modifyitems(config, items):
    """A module's shared fixture is made once: under ``--dist loadgroup`` (``make test``) the
    tests of a module that use one of its module- or class-scoped fixtures (a kernel, a program
    runner, a JupyterLab server, a subprocess's results) join one xdist group, so one worker runs
    them all and makes the fixture once, not once per worker. A test already in a group keeps it."""
    if not config.getoption("loadgroup", False):  # set by xdist for --dist loadgroup, workers included
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        if shared_fixtures(item):
            item.add_marker(pytest.mark.xdist_group(f"shared:{item.module.__name__}"))


def shared_fixtures(item) -> list[str]:
    """The fixtures ``item`` uses that live longer than one test but not the whole session."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return sorted(name for name in item.fixturenames
                  if defs.get(name) and defs[name][-1].scope in ("module", "class", "package"))
