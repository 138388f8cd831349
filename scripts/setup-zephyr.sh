#!/usr/bin/env bash
# Prepare what a Zephyr build of Colibri needs on Debian 12, from sources you
# already have: nothing is downloaded except Debian and PyPI packages.
#
#   scripts/setup-zephyr.sh [options] WORKSPACE
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
#   --no-apt, --no-pip    skip the package installs
#
# WORKSPACE must lie outside this repository. It receives zephyr/, modules/,
# a west workspace marker (.west/config) and colibri-env.sh to source:
#
#   . WORKSPACE/colibri-env.sh
#   west build -b mps3/corstone300/an547 samples/zephyr/hello_moe -- -DCOLIBRI_MODEL_DIR=out/model
#
# docs/zephyr.md has the whole story.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"

APT_PACKAGES=(
  cmake ninja-build device-tree-compiler gperf ccache xz-utils file make
  gcc-arm-none-eabi binutils-arm-none-eabi libnewlib-arm-none-eabi
  qemu-system-arm
)
# (Never gcc-multilib: on Debian 12 it removes the aarch64 cross compiler.
#  native_sim is built 64-bit, as native_sim/native/64.)
PIP_PACKAGES=(
  west pyelftools pykwalify jsonschema pyyaml packaging
  anytree psutil ply tabulate colorama natsort junitparser intelhex
)
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
DO_APT=1 DO_PIP=1
MODULES=()
while (($#)); do
  case "$1" in
    --zephyr) ZEPHYR_SRC="$2"; shift 2 ;;
    --zephyr-rev) ZEPHYR_REV="$2"; shift 2 ;;
    --zephyr-subdir) ZEPHYR_SUBDIR="$2"; shift 2 ;;
    --module) MODULES+=("$2"); shift 2 ;;
    --upstream) UPSTREAM="$2"; shift 2 ;;
    --no-apt) DO_APT=0; shift ;;
    --no-pip) DO_PIP=0; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$WS" ] || die "one WORKSPACE only"; WS="$1"; shift ;;
  esac
done
[ -n "$WS" ] || die "usage: scripts/setup-zephyr.sh [options] WORKSPACE (see --help)"
mkdir -p "$WS"
WS="$(cd "$WS" && pwd)"
case "$WS/" in "$REPO"/*) die "WORKSPACE $WS is inside the repository; put it elsewhere" ;; esac

install_apt() {
  local missing=() pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  say "installing Debian packages: ${missing[*]}"
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_pip() {
  [ -x "$REPO/.venv/bin/python" ] || "$REPO/scripts/setup.sh"
  say "installing Python packages into .venv: ${PIP_PACKAGES[*]}"
  "$REPO/.venv/bin/python" -m pip install -q "${PIP_PACKAGES[@]}"
}

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
  cat > "$WS/colibri-env.sh" <<EOF
# Source this before west build / west twister (written by setup-zephyr.sh).
export PATH="$REPO/.venv/bin:\$PATH"
export ZEPHYR_BASE="$WS/zephyr"
export GNUARMEMB_TOOLCHAIN_PATH=/usr
# Cortex-M boards: ZEPHYR_TOOLCHAIN_VARIANT=gnuarmemb; native_sim: host.
export ZEPHYR_TOOLCHAIN_VARIANT=\${ZEPHYR_TOOLCHAIN_VARIANT:-gnuarmemb}
EOF
}

((DO_APT)) && install_apt
((DO_PIP)) && install_pip
if [ ! -f "$WS/zephyr/VERSION" ]; then
  [ -n "$ZEPHYR_SRC" ] || die "no $WS/zephyr yet: give --zephyr SRC"
  say "Zephyr from $ZEPHYR_SRC ${ZEPHYR_SUBDIR:+($ZEPHYR_SUBDIR) }-> $WS/zephyr"
  rmdir "$WS/zephyr" 2>/dev/null || true
  export_tree "$ZEPHYR_SRC" "$ZEPHYR_REV" "$ZEPHYR_SUBDIR" "$WS/zephyr"
fi
[ -f "$WS/zephyr/VERSION" ] || die "$WS/zephyr is not a Zephyr tree (no VERSION)"
restore_upstream_files
for m in "${MODULES[@]}"; do add_module "$m"; done
[ -f "$WS/modules/hal/cmsis_6/zephyr/module.yml" ] ||
  say "warning: no CMSIS_6 module: Cortex-M boards will not configure (--module cmsis_6=SRC)"
write_workspace_files
say "done: . $WS/colibri-env.sh   (Zephyr $(awk '/VERSION_MAJOR|VERSION_MINOR|PATCHLEVEL/ {printf "%s.", $3}' "$WS/zephyr/VERSION" | sed 's/\.$//'))"
