"""A/B weight slots on the Linux port: colibri-slot installs into the slot
that is not running, colibri-run --slots boots, tries and confirms; a power
cut (SIGKILL through cut_writes.so, whole or torn) at every pwrite of an
install and of the trial boot that follows leaves a store that boots the old
or the new image, verified, never a mix (docs/ota.md)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from linux_helpers import REPO, make
from ota_images import PUBLIC, write_update_images

HOST = REPO / "build" / "host"
KEY = PUBLIC.hex()


@pytest.fixture(scope="module")
def tools():
    for target in ("host", "build/host/cut_writes.so"):
        done = make(target)
        assert done.returncode == 0, done.stderr
    return HOST


def slot(*args, env=None, check=True):
    done = subprocess.run([str(HOST / "colibri-slot"), *map(str, args)], capture_output=True,
                          text=True, timeout=60, env=env)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def run_store(store, env=None, check=True, *extra):
    done = subprocess.run([str(HOST / "colibri-run"), str(store), "--slots", "--trusted-key", KEY,
                           "--ids", "1,2,3", "--gen", "2", "--threads", "1", "--stats", *extra],
                          capture_output=True, text=True, timeout=60, env=env)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def fingerprint(done) -> int:
    return int(re.search(r"fingerprint=0x([0-9a-f]+)", done.stderr).group(1), 16)


def cut_env(tmp_path, at: int | None = None, tear: bool = False) -> dict:
    env = dict(os.environ, LD_PRELOAD=str(HOST / "cut_writes.so"),
               COLIBRI_CUT_COUNT=str(tmp_path / "count"))
    if at is not None:
        env["COLIBRI_CUT_AT"] = str(at)
        env["COLIBRI_CUT_TEAR"] = "1" if tear else "0"
    return env


def counted(tmp_path, fn) -> int:
    fn(cut_env(tmp_path))
    return int((tmp_path / "count").read_text())


@pytest.fixture(scope="module")
def world(tools, tiny_image, tmp_path_factory):
    root = tmp_path_factory.mktemp("slots")
    images = write_update_images(tiny_image.read_bytes(), root / "images")
    size = max(p.stat().st_size for p in images.values())
    factory = root / "factory.bin"
    slot("init", factory, "--slot-size", (size + 4095) // 4096 * 4096 + 4096)
    slot("install", factory, images["old"], "--trusted-key", KEY)
    assert "slot A confirmed" in run_store(factory).stderr
    fps = {name: int.from_bytes(images[name].read_bytes()[24:28], "little")
           for name in ("old", "new")}
    return root, images, factory, fps


def test_install_boot_trial_confirm_and_refusals(world, tmp_path):
    root, images, factory, fps = world
    store = tmp_path / "store.bin"
    shutil.copy(factory, store)
    assert fingerprint(run_store(store)) == fps["old"]
    for name, status in (("other", 25), ("unsigned", 22)):
        done = slot("install", store, images[name], "--trusted-key", KEY, check=False)
        assert done.returncode == 1 and f"(status {status})" in done.stderr, done.stderr
    assert fingerprint(run_store(store)) == fps["old"]
    assert "slot B" in slot("install", store, images["new"], "--trusted-key", KEY).stdout
    first = run_store(store, None, True, "--no-confirm")
    assert fingerprint(first) == fps["new"] and "on trial" in first.stderr
    reverted = run_store(store)          # never confirmed: B is bad, A comes back
    assert fingerprint(reverted) == fps["old"] and "marked bad" in reverted.stderr
    slot("install", store, images["new"], "--trusted-key", KEY)
    assert fingerprint(run_store(store)) == fps["new"]     # tried and confirmed
    assert fingerprint(run_store(store)) == fps["new"]
    done = slot("install", store, images["old"], "--trusted-key", KEY, check=False)
    assert "(status 30)" in done.stderr                    # rollback refused
    status = slot("status", store, "--trusted-key", KEY).stdout
    assert re.search(r"slot B: good, .* verify: ok", status), status


def test_power_cut_at_every_write(world, tmp_path, record_property):
    root, images, factory, fps = world
    store = tmp_path / "store.bin"

    def install(env):
        return slot("install", store, images["new"], "--trusted-key", KEY, env=env, check=False)

    shutil.copy(factory, store)
    n_install = counted(tmp_path, install)
    n_boot = counted(tmp_path, lambda env: run_store(store, env))
    assert n_install > 20 and n_boot == 4          # trial (TRYING), confirm: 2 writes each
    cuts, booted = 0, {"old": 0, "new": 0}
    for k in range(1, n_install + n_boot + 1):
        for tear in (False, True):
            shutil.copy(factory, store)
            if k <= n_install:
                assert install(cut_env(tmp_path, k, tear)).returncode == -9
            else:
                install(None)
                assert run_store(store, cut_env(tmp_path, k - n_install, tear),
                                 False).returncode == -9
            cuts += 1
            after = run_store(store)                 # power on: old or new, verified
            which = {v: n for n, v in fps.items()}.get(fingerprint(after))
            assert which is not None, f"cut {k} tear {tear}: {after.stderr}"
            booted[which] += 1
            assert fingerprint(run_store(store)) == fps[which], f"cut {k}: not stable"
            if not tear:                             # still updatable
                install(None)
                assert fingerprint(run_store(store)) == fps["new"], f"cut {k}: no update after"
    record_property("linux_powercut_cuts", cuts)
    assert cuts == 2 * (n_install + n_boot) and booted["old"] > 0 and booted["new"] > 0
    print(f"Linux slot store: {cuts} cut points ({n_install} install writes, {n_boot} boot "
          f"writes, whole and torn): booted old {booted['old']}, new {booted['new']}")
