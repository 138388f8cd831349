"""What every command has (issue 12): --version with the one version of the
tools; converter outputs readable as the umask allows (not mkstemp's 0600);
a warning when a checkpoint has no tokenizer."""
from __future__ import annotations

import logging
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from colibri_tools import __version__, convert
from colibri_tools.version import VERSION

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"])


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_command_states_its_version(script):
    done = subprocess.run([str(REPO / ".venv" / "bin" / script), "--version"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(rf"{script} {re.escape(VERSION)} \(model image format 1\.1\)\n",
                        done.stdout)


def test_one_version():
    assert __version__ == VERSION
    text = (REPO / "pyproject.toml").read_text()
    assert 'version = {attr = "colibri_tools.version.VERSION"}' in text
    assert not re.search(r'^version = "', text, re.M)  # no second copy


def test_outputs_follow_the_umask(hf_checkpoint, tmp_path):
    old = os.umask(0o022)
    try:
        result = convert(hf_checkpoint("mixtral"), tmp_path / "out", progress=False)
    finally:
        os.umask(old)
    for path in (result.image_path, result.header_path):
        assert path.stat().st_mode & 0o777 == 0o644, path


def test_missing_tokenizer_is_warned_about(hf_checkpoint, copy_checkpoint, tmp_path, caplog):
    hf_dir = copy_checkpoint(hf_checkpoint("mixtral"))
    (hf_dir / "tokenizer.json").unlink(missing_ok=True)
    with caplog.at_level(logging.WARNING, logger="colibri_tools.convert"):
        convert(hf_dir, tmp_path / "out", progress=False)
    assert "has no tokenizer.json" in caplog.text
