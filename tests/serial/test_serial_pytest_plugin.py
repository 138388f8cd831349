"""The pytest plugin (colibri_tools.testing.pytest_plugin): device tests skip without
--colibri-port and get a connected client with it. Runs an inner pytest with
entry-point plugins off, so it does not matter whether the plugin is installed."""
from __future__ import annotations

import os
import subprocess
import sys

INNER = '''
import pytest

def test_device(colibri_device, colibri_board):
    assert colibri_device.info.vocab_size == 97 and colibri_board == "qemu_virt_a72"
    colibri_device.reset()
    assert colibri_device.forward([1, 2]).status == 0

def test_suite(colibri_suite):
    assert colibri_suite.vocab_size == 97

@pytest.mark.colibri_device
def test_marked():
    pass
'''


def _inner(tmp_path, *args: str) -> str:
    (tmp_path / "test_inner.py").write_text(INNER)
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "-p", "colibri_tools.testing.pytest_plugin", "test_inner.py", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def test_without_a_port_device_tests_skip(tmp_path):
    out = _inner(tmp_path)
    assert "3 skipped" in out, out
    assert "no Colibri device: pass --colibri-port URL" in out


def test_with_a_port_the_fixture_connects(tmp_path, runner, suite_file):
    out = _inner(tmp_path, "--colibri-port", runner.url, "--colibri-board", "qemu_virt_a72",
                 "--colibri-suite", str(suite_file))
    assert "3 passed" in out, out
