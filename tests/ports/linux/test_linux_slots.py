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
    # trial (TRYING), confirm: each record write erases and programs both copies
    assert n_install > 20 and n_boot == 8
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


def test_a_prefix_of_an_image_never_installs(world, tmp_path):
    """Issue 25 #1: NEW fails its trial in B (BAD, its bytes still there), then a
    sector-aligned prefix of NEW, or NEW without its signature block, is sent:
    the slot's old tail would complete it; the update must verify exactly the
    bytes it wrote."""
    root, images, factory, fps = world
    new = images["new"].read_bytes()
    plain = int.from_bytes(new[16:24], "little")
    parts = {"4 KiB prefix": new[:4096], "all whole sectors": new[:plain // 4096 * 4096],
             "64 bytes more": new + bytes(64)}
    for what, data in parts.items():
        store = tmp_path / "store.bin"
        shutil.copy(factory, store)
        slot("install", store, images["new"], "--trusted-key", KEY)
        run_store(store, None, True, "--no-confirm")
        assert "marked bad" in run_store(store).stderr
        part = tmp_path / "part.bin"
        part.write_bytes(data)
        done = slot("install", store, part, "--trusted-key", KEY, check=False)
        assert done.returncode == 1 and "(status 36)" in done.stderr, (what, done.stderr)
        status = slot("status", store, "--trusted-key", KEY).stdout
        assert re.search(r"slot B: empty, generation 0, fingerprint 0x00000000", status), status
        assert fingerprint(run_store(store)) == fps["old"]


def test_the_last_bootable_image_cannot_be_rejected(world, tmp_path):
    """Issue 25 #3: rejecting A while it is the only good slot (B empty, or B on
    trial: A typed for B) is refused and changes nothing; B once confirmed, A may go."""
    root, images, factory, fps = world
    store = tmp_path / "store.bin"
    shutil.copy(factory, store)
    before = store.read_bytes()
    done = slot("reject", store, "A", check=False)
    assert done.returncode == 1 and "last bootable image" in done.stderr, done.stderr
    assert store.read_bytes() == before
    slot("install", store, images["new"], "--trusted-key", KEY)
    run_store(store, None, True, "--no-confirm")           # B on trial
    done = slot("reject", store, "A", check=False)
    assert done.returncode == 1 and "last bootable image" in done.stderr, done.stderr
    done = slot("install", store, images["new"], "--trusted-key", KEY, check=False)
    assert "slot B is on trial: confirm or reject the image on trial first" in done.stderr
    slot("confirm", store, "B")
    slot("reject", store, "A")
    assert "last bootable image" in slot("reject", store, "B", check=False).stderr
    assert fingerprint(run_store(store)) == fps["new"]


def test_one_damaged_record_copy_keeps_a_confirmed_update(world, tmp_path):
    """Issue 25 #7: after B is confirmed, one bit of either record copy flips: the
    store still runs B, confirmed (no revert, B not marked bad), and the boot
    rewrites the damaged copy."""
    root, images, factory, fps = world
    for copy in (0, 1):
        store = tmp_path / "store.bin"
        shutil.copy(factory, store)
        slot("install", store, images["new"], "--trusted-key", KEY)
        assert fingerprint(run_store(store)) == fps["new"]  # tried and confirmed
        data = bytearray(store.read_bytes())
        data[4096 * copy + 17] ^= 0x01                      # slot B's state byte
        store.write_bytes(bytes(data))
        done = run_store(store)
        assert fingerprint(done) == fps["new"] and "marked bad" not in done.stderr, done.stderr
        status = slot("status", store, "--trusted-key", KEY).stdout
        assert re.search(r"slot B: good, .* verify: ok", status), status
        assert store.read_bytes()[4096 * copy + 17] == 3    # repaired: GOOD again


def test_a_file_that_is_not_a_store_is_refused(world, tmp_path):
    """Issue 25 #9: colibri-slot refuses a model image (or any other file) as
    a store instead of reading a record out of it or writing into it."""
    root, images, factory, fps = world
    model = tmp_path / "model.bin"
    model.write_bytes(images["new"].read_bytes()[:-1] + b"\0" * (4096 - 1))
    odd = tmp_path / "odd.bin"
    odd.write_bytes(factory.read_bytes() + bytes(4096))
    for path in (images["new"], model, odd):
        before = path.read_bytes()
        for args in (("status", path), ("reject", path, "A"),
                     ("install", path, images["old"])):
            done = slot(*args, check=False)
            assert done.returncode == 1 and "not a slot store" in done.stderr, (args, done.stderr)
        assert path.read_bytes() == before
