"""Print the runtime dependencies of colibri-tools ([project] dependencies in
pyproject.toml), one per line: what a wheel install needs (scripts/setup.sh
downloads their wheels for the fresh-venv test)."""
import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
print("\n".join(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]))
