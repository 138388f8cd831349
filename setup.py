"""Build steps pyproject.toml cannot declare (the metadata is in pyproject.toml).

A wheel (`pip wheel .`) carries:
  * the board files: boards/*.toml mapped into the package as
    colibri_tools.board_files (one copy in git: the repository's boards/),
    with the list of kernel tables of sdk/src/kernels/tables.mk beside them;
  * the engine: libcolibri and libcolibri_linux built here with `make shared`
    and copied into colibri_tools/lib/, so installing needs no compiler. The
    wheel is therefore tagged for this platform (py3-none-linux_<arch>).
An editable install (`pip install -e .`) builds nothing: the source tree's
boards/ and build/host (make host) are used in place.
"""
import re
import shutil
import subprocess
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
LIBRARIES = ("libcolibri.so", "libcolibri_linux.so")
SO_MAJOR = "0"  # COLIBRI_VERSION_MAJOR; tests/tools/test_packaging.py checks it


class BuildPyWithEngine(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        package = Path(self.build_lib) / "colibri_tools"
        tables_mk = (ROOT / "sdk" / "src" / "kernels" / "tables.mk").read_text()
        kernels = sorted(re.findall(r"^KERNEL_SOURCES_(\w+)\s*:=", tables_mk, re.MULTILINE))
        (package / "board_files" / "kernel_tables.txt").write_text("\n".join(kernels) + "\n")
        work = Path(self.get_finalized_command("build").build_temp).resolve() / "colibri-c"
        subprocess.run(["make", "-s", "-j2", f"BUILD={work}", "shared"], cwd=ROOT, check=True)
        (package / "lib").mkdir(exist_ok=True)
        for name in LIBRARIES:
            shutil.copyfile(work / "host" / name, package / "lib" / f"{name}.{SO_MAJOR}")
            (package / "lib" / f"{name}.{SO_MAJOR}").chmod(0o755)


class PlatformWheel(bdist_wheel):
    """Not pure Python (it holds shared libraries), but independent of the Python ABI."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return ("py3", "none", super().get_tag()[2])


setup(
    packages=[*find_packages("tools", include=["colibri_tools*"]), "colibri_tools.board_files"],
    package_dir={"": "tools", "colibri_tools.board_files": "boards"},
    package_data={"colibri_tools.board_files": ["*.toml"]},
    cmdclass={"build_py": BuildPyWithEngine, "bdist_wheel": PlatformWheel},
)
