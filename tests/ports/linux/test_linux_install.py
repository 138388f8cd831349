"""`make install PREFIX=...`: the header, the core and Linux port libraries,
pkg-config files and a CMake config package, used by real consumers (a CMake
project with find_package(colibri), a pkg-config build) whose greedy tokens
must equal colibri-run's."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from linux_helpers import REPO, run

CONSUMER_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "colibri.h"
#include "colibri_linux.h"

/* consumer MODEL.bin N: greedy-decode N tokens after the prompt 1,2,3. */
int main(int argc, char **argv)
{
    colibri_linux_mapping map;
    colibri_linux_port_ctx ctx;
    colibri_port port;
    colibri_model model;
    colibri_state state;
    char err[1024];
    int32_t id[3] = {1, 2, 3};
    int n = argc > 2 ? atoi(argv[2]) : 4;
    if (argc < 3 || colibri_linux_map(&map, argv[1], 0, err, sizeof err) != COLIBRI_LINUX_OK) {
        fprintf(stderr, "map: %s\n", argc < 3 ? "usage" : err);
        return 1;
    }
    ctx.map = &map;
    ctx.pool = colibri_linux_pool_start(2);
    colibri_linux_port_init(&port, &ctx);
    colibri_options opt = {0, &port};
    if (colibri_init(&model, map.data, map.size, &opt) != COLIBRI_OK ||
        colibri_version() != COLIBRI_VERSION_NUMBER) {
        return 2;
    }
    uint32_t c = 16;
    size_t kv_size = colibri_state_size(&model, c), work_size = colibri_scratch_size(&model, c);
    void *kv = colibri_linux_alloc_aligned(kv_size, 64);
    void *work = colibri_linux_alloc_aligned(work_size, 64);
    float *logits = malloc(model.hp.vocab_size * sizeof(float));
    colibri_state_init(&state, &model, kv, kv_size, c);
    uint32_t count = 3;
    for (int i = 0; i < n; i++) {
        colibri_status st = colibri_forward(&model, &state, id, count, logits,
                                            COLIBRI_LOGITS_LAST, work, work_size, NULL);
        if (st != COLIBRI_OK) {
            fprintf(stderr, "forward: %s\n", colibri_strerror(st));
            return 3;
        }
        id[0] = (int32_t)colibri_argmax(logits, model.hp.vocab_size);
        count = 1;
        printf(i == 0 ? "%d" : " %d", (int)id[0]);
    }
    printf("\n");
    free(logits);
    free(work);
    free(kv);
    colibri_linux_pool_stop(ctx.pool);
    colibri_linux_unmap(&map);
    return 0;
}
"""

CMAKE_LISTS = """cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(colibri {version} REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE colibri::linux)
add_executable(consumer_static main.c)
target_link_libraries(consumer_static PRIVATE colibri::linux_static)
"""


@pytest.fixture(scope="module")
def prefix(tmp_path_factory, colibri_run) -> Path:
    """An installed tree (after `make host`, which colibri_run ran)."""
    root = tmp_path_factory.mktemp("install") / "prefix"
    done = subprocess.run(["make", "-s", "install", f"PREFIX={root}"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def _expected(colibri_run, image) -> str:
    done = run(colibri_run, image, "--ids", "1,2,3", "--gen", "5")
    assert done.returncode == 0
    return done.stdout


def test_install_lays_out_the_files(prefix):
    names = {str(p.relative_to(prefix)) for p in prefix.rglob("*")}
    for want in ("include/colibri.h", "include/colibri_ota.h", "include/colibri_expert_cache.h",
                 "include/colibri_linux.h",
                 "lib/libcolibri.a", "lib/libcolibri.so", "lib/libcolibri.so.0", "lib/libcolibri.so.0.1.0",
                 "lib/libcolibri_linux.a", "lib/libcolibri_linux.so.0.1.0",
                 "lib/pkgconfig/colibri.pc", "lib/pkgconfig/colibri-linux.pc",
                 "lib/cmake/colibri/colibriConfig.cmake",
                 "lib/cmake/colibri/colibriConfigVersion.cmake", "bin/colibri-run"):
        assert want in names, want
    assert os.readlink(prefix / "lib" / "libcolibri.so.0") == "libcolibri.so.0.1.0"
    dyn = subprocess.run(["readelf", "-d", str(prefix / "lib" / "libcolibri_linux.so.0.1.0")],
                         capture_output=True, text=True, check=True).stdout
    assert "[libcolibri_linux.so.0]" in dyn and "[libcolibri.so.0]" in dyn  # SONAME, NEEDED
    assert "[$ORIGIN]" in dyn


def test_install_refuses_a_relative_prefix():
    done = subprocess.run(["make", "-s", "install", "PREFIX=relative/dir"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and "absolute path" in done.stdout + done.stderr
    assert not (REPO / "relative").exists()


def _cmake_build(src: Path, prefix: Path, version: str) -> subprocess.CompletedProcess:
    src.mkdir(parents=True, exist_ok=True)
    (src / "main.c").write_text(CONSUMER_C)
    (src / "CMakeLists.txt").write_text(CMAKE_LISTS.format(version=version))
    build = src / "build"
    done = subprocess.run(["cmake", "-S", str(src), "-B", str(build), "-G", "Ninja",
                           f"-DCMAKE_PREFIX_PATH={prefix}"], capture_output=True, text=True,
                          timeout=300)
    if done.returncode == 0:
        done = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True,
                              timeout=300)
    return done


def test_cmake_find_package_consumer(prefix, tmp_path, colibri_run, tiny_image):
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are not installed (scripts/setup.sh installs them)")
    moved = tmp_path / "elsewhere"  # the package is relocatable: paths are relative to it
    shutil.copytree(prefix, moved, symlinks=True)
    done = _cmake_build(tmp_path / "app", moved, "0.1")
    assert done.returncode == 0, done.stdout + done.stderr
    want = _expected(colibri_run, tiny_image)
    for exe in ("consumer", "consumer_static"):
        got = run(tmp_path / "app" / "build" / exe, tiny_image, 5)
        assert got.returncode == 0, got.stderr
        assert got.stdout == want
    ldd = subprocess.run(["ldd", str(tmp_path / "app" / "build" / "consumer")],
                         capture_output=True, text=True).stdout
    assert str(moved / "lib" / "libcolibri_linux.so.0") in ldd, ldd
    assert "libcolibri" not in subprocess.run(
        ["ldd", str(tmp_path / "app" / "build" / "consumer_static")], capture_output=True,
        text=True).stdout


@pytest.mark.parametrize("version", ["0.2", "1.0"])
def test_cmake_refuses_an_incompatible_version(prefix, tmp_path, version):
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are not installed (scripts/setup.sh installs them)")
    done = _cmake_build(tmp_path / "app", prefix, version)
    assert done.returncode != 0
    assert "0.1.0" in done.stdout + done.stderr  # CMake names the version found


def test_pkg_config_consumer(prefix, tmp_path, colibri_run, tiny_image):
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed")
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))

    def pkg(*args: str) -> str:
        return subprocess.run(["pkg-config", *args], env=env, capture_output=True, text=True,
                              check=True).stdout.split()

    assert pkg("--modversion", "colibri") == ["0.1.0"]
    flags = pkg("--cflags", "--libs", "colibri-linux")
    paths = {f[:2]: os.path.normpath(f[2:]) for f in flags if f[:2] in ("-I", "-L")}
    assert paths == {"-I": str(prefix / "include"), "-L": str(prefix / "lib")}  # ${pcfiledir}
    assert "-lcolibri_linux" in flags and "-lcolibri" in flags
    (tmp_path / "main.c").write_text(CONSUMER_C)
    exe = tmp_path / "consumer"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", str(tmp_path / "main.c"),
                    "-o", str(exe), *flags, f"-Wl,-rpath,{prefix}/lib"], check=True)
    got = run(exe, tiny_image, 5)
    assert got.returncode == 0 and got.stdout == _expected(colibri_run, tiny_image)
