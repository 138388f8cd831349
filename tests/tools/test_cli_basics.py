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


# The format version docs/format.md specifies (its title), which the C core
# (colibri.h) and the tools read.
FORMAT = re.match(r"# Colibri model image format, version (\d+\.\d+)\n",
                  (REPO / "docs" / "format.md").read_text()).group(1)


def test_the_core_reads_the_documented_format():
    header = (REPO / "sdk" / "include" / "colibri.h").read_text()
    major = re.search(r"#define COLIBRI_FORMAT_MAJOR (\d+)", header).group(1)
    minor = re.search(r"#define COLIBRI_FORMAT_MINOR (\d+)", header).group(1)
    assert f"{major}.{minor}" == FORMAT


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_command_states_its_version(script):
    done = subprocess.run([str(REPO / ".venv" / "bin" / script), "--version"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(rf"{script} {re.escape(VERSION)} \(model image format "
                        rf"{re.escape(FORMAT)}\)\n", done.stdout)


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
    with caplog.at_level(logging.WARNING, logger="colibri_tools.converter.convert"):
        convert(hf_dir, tmp_path / "out", progress=False)
    assert "has no tokenizer.json" in caplog.text


def test_an_existing_file_as_output_folder_is_named(hf_checkpoint, tmp_path):
    """Not a raw "[Errno 17] File exists": the converter's output is a folder."""
    taken = tmp_path / "out"
    taken.write_text("mine")
    done = subprocess.run([str(REPO / ".venv" / "bin" / "colibri-convert"),
                           str(hf_checkpoint("mixtral")), "-o", str(taken), "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "a file of that name exists; the output is a folder" in done.stderr
    assert "Errno" not in done.stderr and taken.read_text() == "mine"


def test_image_progress_bars_only_on_a_terminal(hf_checkpoint, tmp_path):
    model = convert(hf_checkpoint("mixtral"), tmp_path / "m", progress=False).image_path
    done = subprocess.run([str(REPO / ".venv" / "bin" / "colibri-image"), str(model), "--board",
                           "qemu_an547", "-o", str(tmp_path / "w.hex")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""                      # no bar drawn into a log
    assert "every byte matches its source" in done.stdout
