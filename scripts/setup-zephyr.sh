#!/usr/bin/env bash
# Prepare what a Zephyr build of Colibri needs on Debian 12, from sources you
# already have: nothing is downloaded except Debian and PyPI packages.
#
#   scripts/setup-zephyr.sh [options] WORKSPACE
#
# WORKSPACE is either a Zephyr 4.x workspace you already have (a west
# workspace made by `west init`/`west update`, or a pruned tree such as
# ../shared/zephyr: zephyr/ plus modules/hal/...), which is used as it is, or
# a new folder that is filled from the sources given below.
#
#   --zephyr SRC          a Zephyr tree (directory) or git directory (bare
#                         mirror); required unless WORKSPACE/zephyr exists
#   --zephyr-rev REV      commit of a git SRC (default HEAD)
#   --zephyr-subdir DIR   folder of SRC that holds Zephyr (e.g. "zephyr" when
#                         the repository carries Zephyr in a subfolder)
#   --module NAME=SRC[@REV]
#                         a Zephyr module into WORKSPACE/modules/...: cmsis_6
#                         (Cortex-M, needed), hal_stm32 (STM32 boards); SRC is a
#                         directory or a git directory; REV defaults to the
#                         revision Zephyr's west.yml pins
#   --upstream SRC[@REV]  an upstream Zephyr (directory or git directory) to
#                         restore files a copy lacks (see FILES_UPSTREAM_TRACKS)
#   --no-install          skip scripts/setup.sh (the Debian and Python packages)
#
# WORKSPACE must lie outside this repository. It receives (when new) zephyr/,
# modules/, a west workspace marker (.west/config), and colibri-env.sh to
# source:
#
#   . WORKSPACE/colibri-env.sh
#   west build -b mps3/corstone300/an547 samples/zephyr/hello_moe -- -DCOLIBRI_MODEL_DIR=out/model
#
# docs/zephyr.md has the whole story.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"

# The Debian packages a Zephyr build needs (cmake, ninja, dtc, the Arm
# toolchain, QEMU) and the Python ones (west and twister's: the [zephyr] extra
# of pyproject.toml) are installed by scripts/setup.sh, like everything else.
# Files upstream Zephyr tracks that some copies lack (their .gitignore hides
# build/, target/ and *.swo); Kconfig cannot be parsed without them.
FILES_UPSTREAM_TRACKS=(
  drivers/i2c/target/Kconfig
  drivers/i2c/target/Kconfig.eeprom
  drivers/i2c/target/CMakeLists.txt
  subsys/logging/backends/Kconfig.swo
  share/sysbuild/build/Kconfig
)

die() { echo "setup-zephyr: $*" >&2; exit 1; }
say() { echo "setup-zephyr: $*"; }

ZEPHYR_SRC="" ZEPHYR_REV="HEAD" ZEPHYR_SUBDIR="" UPSTREAM="" WS=""
DO_INSTALL=1
MODULES=()
while (($#)); do
  case "$1" in
    --zephyr) ZEPHYR_SRC="$2"; shift 2 ;;
    --zephyr-rev) ZEPHYR_REV="$2"; shift 2 ;;
    --zephyr-subdir) ZEPHYR_SUBDIR="$2"; shift 2 ;;
    --module) MODULES+=("$2"); shift 2 ;;
    --upstream) UPSTREAM="$2"; shift 2 ;;
    --no-install) DO_INSTALL=0; shift ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$WS" ] || die "one WORKSPACE only"; WS="$1"; shift ;;
  esac
done
[ -n "$WS" ] || die "usage: scripts/setup-zephyr.sh [options] WORKSPACE (see --help)"
WS="$(realpath -m "$WS")"
case "$WS/" in "$REPO"/*) die "WORKSPACE $WS is inside the repository; put it elsewhere" ;; esac
mkdir -p "$WS"

is_git_dir() { git --git-dir="$1" rev-parse --git-dir >/dev/null 2>&1; }

# Pathspec excludes for the blobs a snapshot lacks, so git archive skips them.
missing_blob_excludes() {
  local gitdir="$1" rev="$2" spec="$3" list missing
  list="$(mktemp)" missing="$(mktemp)"
  git -c core.quotepath=off --git-dir="$gitdir" ls-tree -r "$rev" -- "$spec" > "$list"
  awk '{print $3}' "$list" | git --git-dir="$gitdir" cat-file --batch-check |
    awk '$2 == "missing" {print $1}' > "$missing"
  grep -F -f "$missing" "$list" | cut -f2 | sed 's/^/:(exclude)/' || true
  rm -f "$list" "$missing"
}

# export SRC (dir or git dir) [REV] [SUBDIR] into DEST
export_tree() {
  local src="$1" rev="$2" sub="$3" dest="$4"
  [ -e "$dest" ] && { say "$dest exists, kept"; return 0; }
  mkdir -p "$dest"
  if is_git_dir "$src"; then
    local excludes=() strip=0 spec="."
    if [ -n "$sub" ]; then spec="$sub"; strip=$(awk -F/ '{print NF}' <<<"$sub"); fi
    mapfile -t excludes < <(missing_blob_excludes "$src" "$rev" "$spec")
    ((${#excludes[@]})) && say "$src: ${#excludes[@]} files absent from the snapshot are skipped"
    git --git-dir="$src" archive "$rev" -- "$spec" "${excludes[@]}" |
      tar -x -C "$dest" --strip-components="$strip"
  elif [ -d "$src/${sub:-.}" ]; then
    cp -a "$src/${sub:-.}/." "$dest/"
  else
    die "$src is neither a directory nor a git directory"
  fi
}

west_pin() { # revision Zephyr's west.yml pins for project NAME
  awk -v name="$1" '$1 == "-" && $2 == "name:" {p = ($3 == name)} p && $1 == "revision:" {print $2; exit}' \
    "$WS/zephyr/west.yml"
}
west_path() {
  awk -v name="$1" '$1 == "-" && $2 == "name:" {p = ($3 == name)} p && $1 == "path:" {print $2; exit}' \
    "$WS/zephyr/west.yml"
}

add_module() {
  local name="${1%%=*}" rest="${1#*=}" src rev path
  src="${rest%@*}"; rev="${rest#"$src"}"; rev="${rev#@}"
  [ -n "$rev" ] || rev="$(west_pin "$name")"
  path="$(west_path "$name")"
  [ -n "$path" ] || die "module $name is not in $WS/zephyr/west.yml"
  is_git_dir "$src" || rev="(directory)"
  say "module $name -> $WS/$path ($rev)"
  export_tree "$src" "${rev:-HEAD}" "" "$WS/$path"
}

restore_upstream_files() {
  local missing=() f
  for f in "${FILES_UPSTREAM_TRACKS[@]}"; do [ -f "$WS/zephyr/$f" ] || missing+=("$f"); done
  ((${#missing[@]})) || return 0
  [ -n "$UPSTREAM" ] || die "$WS/zephyr lacks files upstream Zephyr tracks: ${missing[*]}
  Give an upstream Zephyr of the same version with --upstream SRC[@REV] to restore them."
  local src="${UPSTREAM%@*}" rev="${UPSTREAM#"${UPSTREAM%@*}"}"; rev="${rev#@}"
  for f in "${missing[@]}"; do
    mkdir -p "$(dirname "$WS/zephyr/$f")"
    if is_git_dir "$src"; then
      git --git-dir="$src" show "${rev:-HEAD}:$f" > "$WS/zephyr/$f"
    else
      cp "$src/$f" "$WS/zephyr/$f"
    fi
    say "restored zephyr/$f"
  done
}

write_workspace_files() {
  mkdir -p "$WS/.west"
  [ -f "$WS/.west/config" ] || printf '[manifest]\npath = zephyr\nfile = west.yml\n\n[zephyr]\nbase = zephyr\n' \
    > "$WS/.west/config"
  local modules=() m
  for m in "$WS"/modules/hal/cmsis_6 "$WS"/modules/hal/stm32; do
    [ -f "$m/zephyr/module.yml" ] && modules+=("$m")
  done
  cat > "$WS/colibri-env.sh" <<EOF
# Source this before west build / west twister (written by setup-zephyr.sh).
export PATH="$REPO/.venv/bin:\$PATH"
export ZEPHYR_BASE="$WS/zephyr"
# The modules Colibri's boards need, named directly (a pruned tree's west.yml
# lists projects that are not there).
export ZEPHYR_MODULES="$(IFS=';'; echo "${modules[*]}")"
export GNUARMEMB_TOOLCHAIN_PATH=/usr
# Cortex-M boards: ZEPHYR_TOOLCHAIN_VARIANT=gnuarmemb; native_sim: host.
export ZEPHYR_TOOLCHAIN_VARIANT=\${ZEPHYR_TOOLCHAIN_VARIANT:-gnuarmemb}
EOF
}

((DO_INSTALL)) && "$REPO/scripts/setup.sh"
if [ ! -f "$WS/zephyr/VERSION" ]; then
  [ -n "$ZEPHYR_SRC" ] || die "no $WS/zephyr yet: give --zephyr SRC"
  say "Zephyr from $ZEPHYR_SRC ${ZEPHYR_SUBDIR:+($ZEPHYR_SUBDIR) }-> $WS/zephyr"
  rmdir "$WS/zephyr" 2>/dev/null || true
  export_tree "$ZEPHYR_SRC" "$ZEPHYR_REV" "$ZEPHYR_SUBDIR" "$WS/zephyr"
fi
[ -f "$WS/zephyr/VERSION" ] || die "$WS/zephyr is not a Zephyr tree (no VERSION)"
major="$(awk '$1 == "VERSION_MAJOR" {print $3}' "$WS/zephyr/VERSION")"
[ "$major" = 4 ] || say "warning: Zephyr $major.x: the module is built and tested with Zephyr 4.x"
restore_upstream_files
for m in "${MODULES[@]}"; do add_module "$m"; done
[ -f "$WS/modules/hal/cmsis_6/zephyr/module.yml" ] ||
  say "warning: no CMSIS_6 module: Cortex-M boards will not configure (--module cmsis_6=SRC)"
write_workspace_files
say "done: . $WS/colibri-env.sh   (Zephyr $(awk '/VERSION_MAJOR|VERSION_MINOR|PATCHLEVEL/ {printf "%s.", $3}' "$WS/zephyr/VERSION" | sed 's/\.$//'))"
