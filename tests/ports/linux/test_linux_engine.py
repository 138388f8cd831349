"""The Python binding of the engine (tools/colibri_tools/runtime/engine.py): the same
logits bits as colibri-run, the C structs' layout as a C compiler sees it,
errors with the core's status names, and the router observer against
transformers' own router."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from colibri_tools.runtime import engine as engine_mod
from colibri_tools.runtime.engine import STRUCTS, Engine, EngineError, load_library
from linux_helpers import REPO, run
from linux_tiny_image import VOCAB, write_tiny_image


def _colibri_run_logits(colibri_run, image, ids, tmp_path, *args) -> np.ndarray:
    out = tmp_path / "logits.f32"
    done = run(colibri_run, image, "--ids", ",".join(map(str, ids)), "--all-logits", out, *args)
    assert done.returncode == 0, done.stderr
    return np.fromfile(out, "<f4").reshape(len(ids), -1)


# ---- layout ------------------------------------------------------------------------------

LAYOUT_C = """#include <stddef.h>
#include <stdio.h>
#include "colibri.h"
#include "colibri_linux.h"
#define F(s, f) printf(#s " " #f " %zu %zu\\n", offsetof(s, f), sizeof(((s *)0)->f));
#define S(s) printf(#s " sizeof %zu %zu\\n", sizeof(s), _Alignof(s));
int main(void)
{
%s
    return 0;
}
"""


def test_struct_layout_matches_the_c_compiler(tmp_path, colibri_run):
    lines = []
    for c_name, struct in STRUCTS.items():
        lines.append(f"    S({c_name})")
        lines += [f"    F({c_name}, {field})" for field, _ in struct._fields_]
    (tmp_path / "layout.c").write_text(LAYOUT_C.replace("%s", "\n".join(lines)))
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", f"-I{REPO}/sdk/include",
                    f"-I{REPO}/ports/linux", str(tmp_path / "layout.c"), "-o", str(exe)],
                   check=True)
    c_says = {}
    for row in subprocess.run([str(exe)], capture_output=True, text=True,
                              check=True).stdout.splitlines():
        struct, field, offset, size = row.split()
        c_says[(struct, field)] = (int(offset), int(size))
    import ctypes

    for c_name, struct in STRUCTS.items():
        assert c_says[(c_name, "sizeof")] == (ctypes.sizeof(struct), ctypes.alignment(struct)), \
            c_name
        for field, _ in struct._fields_:
            desc = getattr(struct, field)
            assert c_says[(c_name, field)] == (desc.offset, desc.size), (c_name, field)
    # every hparams field of the header is mirrored (a new field fails here)
    header = (REPO / "sdk" / "include" / "colibri.h").read_text()
    block = header.split("typedef struct colibri_hparams {")[1].split("} colibri_hparams;")[0]
    c_fields = [name.strip() for line in block.splitlines()
                if ";" in line and not line.strip().startswith(("/*", "*"))
                for name in line.split(";")[0].split(None, 1)[1].split(",")]
    assert tuple(c_fields) == engine_mod.HPARAMS_FIELDS


def test_versions_match_the_header(colibri_run):
    header = (REPO / "sdk" / "include" / "colibri.h").read_text()
    parts = [int(header.split(f"#define COLIBRI_VERSION_{p} ")[1].split()[0])
             for p in ("MAJOR", "MINOR", "PATCH")]
    assert engine_mod.C_VERSION_NUMBER == parts[0] * 10000 + parts[1] * 100 + parts[2]
    assert f"#define COLIBRI_PORT_VERSION {engine_mod.PORT_VERSION}\n" in header
    lib, path = load_library()
    assert lib.colibri_version() == engine_mod.C_VERSION_NUMBER
    assert path == str(REPO / "build" / "host" / "libcolibri_linux.so")


# ---- the same bits as colibri-run --------------------------------------------------------

@pytest.mark.parametrize("threads,batch", [(1, 1), (2, 32), (2, 5)])
def test_logits_bits_equal_colibri_run(tiny_image, colibri_run, tmp_path, threads, batch):
    ids = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]
    theirs = _colibri_run_logits(colibri_run, tiny_image, ids, tmp_path)
    with Engine(tiny_image, threads=threads, batch=batch) as engine:
        ours = engine.forward(ids, logits="all")
        assert ours.dtype == np.float32 and ours.shape == (len(ids), VOCAB)
        assert ours.tobytes() == theirs.tobytes()
        engine.reset()
        assert engine.forward(ids).tobytes() == theirs[-1].tobytes()
        # one id at a time through the KV state: the same last row
        engine.reset()
        for i in ids[:-1]:
            assert engine.forward([i], logits="none") is None
        assert engine.forward(ids[-1:]).tobytes() == theirs[-1].tobytes()
        assert engine.pos == len(ids)


def test_greedy_ids_equal_colibri_run(tiny_image, colibri_run):
    done = run(colibri_run, tiny_image, "--ids", "7,8,9", "--gen", "12", "--threads", "1")
    with Engine(tiny_image, threads=2) as engine:
        assert engine.greedy([7, 8, 9], 12) == [int(t) for t in done.stdout.split()]
        ids, prompt_ns, steps = engine.timed_greedy([7, 8, 9], 12)
        assert ids == [int(t) for t in done.stdout.split()]
        assert prompt_ns > 0 and len(steps) == 11 and min(steps) > 0


def test_kernel_tables_give_the_same_bits(tiny_image):
    """Every table of the library that this CPU runs (the port's probe says
    which: a library built with avx512vnni also runs on an AVX2-only CPU)."""
    results, ran, not_here = set(), [], []
    for name in engine_mod.kernel_names():
        try:
            engine = Engine(tiny_image, kernels=name, threads=1)
        except EngineError as error:
            assert "runs here" in str(error), str(error)
            not_here.append(name)
            continue
        with engine:
            assert engine.kernels == name
            results.add(engine.forward([1, 2, 3, 4], logits="all").tobytes())
        ran.append(name)
    assert "reference" in ran and len(ran) >= 2, (ran, not_here)
    assert len(results) == 1, f"tables {ran} disagree (not run on this CPU: {not_here})"


# ---- errors: the core's status names -----------------------------------------------------

def _expect(status: str, fn, *phrases):
    with pytest.raises(EngineError) as info:
        fn()
    assert info.value.status == status, str(info.value)
    for phrase in phrases:
        assert phrase in str(info.value)
    return info.value


def test_bad_files_name_the_linux_port_status(tmp_path, tiny_image):
    _expect("COLIBRI_LINUX_E_OPEN", lambda: Engine(tmp_path / "missing.bin"), "missing.bin")
    _expect("COLIBRI_LINUX_E_NOT_REGULAR", lambda: Engine(tmp_path))
    cut = tmp_path / "cut.bin"
    cut.write_bytes(tiny_image.read_bytes()[:4096])
    _expect("COLIBRI_LINUX_E_TRUNCATED", lambda: Engine(cut), "truncated")
    other = tmp_path / "other.bin"
    other.write_bytes(b"\0" * 4096)
    _expect("COLIBRI_LINUX_E_BAD_MAGIC", lambda: Engine(other))


def test_bad_images_name_the_core_status(tmp_path, tiny_image):
    data = bytearray(tiny_image.read_bytes())
    data[24] ^= 0xFF  # the stored meta CRC-32 (docs/format.md)
    bad = tmp_path / "bad.bin"
    bad.write_bytes(bytes(data))
    err = _expect("COLIBRI_E_CHECKSUM", lambda: Engine(bad), "cannot load the model image",
                  "status 5")
    assert err.code == 5 and err.path == str(bad)
    data = bytearray(tiny_image.read_bytes())
    data[-100] ^= 0x55  # tensor data: init accepts it, verify does not
    flipped = tmp_path / "flipped.bin"
    flipped.write_bytes(bytes(data))
    Engine(flipped).close()
    _expect("COLIBRI_E_CHECKSUM", lambda: Engine(flipped, verify=True), "verification")
    _expect("COLIBRI_E_CONFIG_MISMATCH", lambda: Engine(tiny_image, fingerprint=0x1234))


def test_bad_requests_name_the_core_status(tiny_image):
    with Engine(tiny_image, context=8, threads=1) as engine:
        _expect("COLIBRI_E_TOKEN_OUT_OF_RANGE", lambda: engine.forward([1, VOCAB]))
        _expect("COLIBRI_E_TOKEN_OUT_OF_RANGE", lambda: engine.forward([-1]))
        _expect("COLIBRI_E_TOKEN_OUT_OF_RANGE", lambda: engine.forward([1 << 40]))
        assert engine.pos == 0  # a refused call changes nothing
        engine.forward(list(range(8)), logits="none")
        _expect("COLIBRI_E_CONTEXT_FULL", lambda: engine.forward([1]))
        _expect("COLIBRI_E_BAD_ARGUMENT", lambda: engine.forward([]))
        with pytest.raises(ValueError):
            engine.forward([1], logits="some")
    _expect("COLIBRI_E_BAD_ARGUMENT", lambda: engine.forward([1]), "closed")
    _expect("COLIBRI_E_BAD_ARGUMENT", lambda: Engine(tiny_image, context=10**6), "max_context")
    _expect("COLIBRI_E_BAD_ARGUMENT", lambda: Engine(tiny_image, batch=0))
    _expect("COLIBRI_E_BAD_ARGUMENT", lambda: Engine(tiny_image, threads=0))
    _expect("COLIBRI_E_BAD_ARGUMENT", lambda: Engine(tiny_image, kernels="nope"), "nope")


def test_no_library_says_where_it_looked(monkeypatch, tmp_path, tiny_image):
    monkeypatch.setattr(engine_mod, "_LOADED", {})
    monkeypatch.setenv("COLIBRI_LIB", str(tmp_path / "nowhere.so"))
    err = _expect(None, lambda: Engine(tiny_image), "nowhere.so", "make host")
    assert err.code is None
    monkeypatch.setenv("COLIBRI_LIB", str(REPO / "build" / "host"))  # a directory works
    with Engine(tiny_image) as engine:
        assert engine.library_path == str(REPO / "build" / "host" / "libcolibri_linux.so")


def test_model_rewritten_in_place_is_refused(tmp_path, tiny_image):
    image = tmp_path / "m.bin"
    shutil.copyfile(tiny_image, image)
    with Engine(image, threads=1, lock=False) as engine:
        engine.forward([1, 2])
        with open(image, "r+b") as f:
            f.seek(0, 2)
            f.write(b"\0")  # the size changes, as any in-place rewrite changes mtime/size
        _expect(None, lambda: engine.forward([3]), "written while it was in use")


# ---- the router observer -----------------------------------------------------------------

def test_route_counts_equal_colibri_run_stats(tiny_image, colibri_run):
    done = run(colibri_run, tiny_image, "--ids", "1,2,3,4,5", "--gen", "6", "--stats")
    lines = [row for row in done.stderr.splitlines() if ": experts: " in row]
    assert len(lines) == 2
    with Engine(tiny_image, threads=2, batch=2, routes=True) as engine:
        engine.greedy([1, 2, 3, 4, 5], 6)
        counts = engine.routes.counts
    for layer, row in enumerate(lines):
        fields = dict(kv.split("=") for kv in row.split(": experts: ")[1].split())
        assert int(fields["layer"]) == layer and int(fields["top_k"]) == 2
        assert [int(c) for c in fields["counts"].split(",")] == counts[layer].tolist()
        assert int(fields["routed"]) == (5 + 6 - 1) * 2  # every fed token, top_k experts


def test_routes_agree_with_transformers_router(tmp_path):
    torch = pytest.importorskip("torch")
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    model, config = build_model("mixtral", seed=3)
    save_checkpoint(model, tmp_path / "hf", tokenizer=False)
    convert(tmp_path / "hf", tmp_path / "out", progress=False)
    ids = [(11 * i + 5) % config.vocab_size for i in range(17)]
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_router_logits=True)
    k, checked = config.num_experts_per_tok, 0
    with Engine(tmp_path / "out" / "model.bin", threads=2, batch=4, routes=True) as engine:
        engine.forward(ids)
        for layer, logits in enumerate(out.router_logits):
            probs = torch.softmax(logits.float(), dim=-1)
            top = torch.topk(probs, k + 1, dim=-1)
            for pos in range(len(ids)):
                if top.values[pos, k - 1] - top.values[pos, k] < 1e-4:
                    continue  # a near tie: float order may pick either
                want = sorted(top.indices[pos, :k].tolist())
                assert engine.routes.experts[pos, layer].tolist() == want, (layer, pos)
                weights = top.values[pos, :k] / top.values[pos, :k].sum()
                got = dict(zip(engine.routes.experts[pos, layer].tolist(),
                               engine.routes.weights[pos, layer].tolist()))
                for e, w in zip(top.indices[pos, :k].tolist(), weights.tolist()):
                    assert got[e] == pytest.approx(w, abs=1e-5)
                checked += 1
    assert checked >= len(ids) * config.num_hidden_layers * 3 // 4
    assert (engine.routes.experts[len(ids):] == -1).all()


def test_the_observer_changes_no_bit(tiny_image):
    with Engine(tiny_image, threads=1) as plain, Engine(tiny_image, threads=1,
                                                        routes=True) as observed:
        assert plain.forward([5, 6, 7], logits="all").tobytes() == \
            observed.forward([5, 6, 7], logits="all").tobytes()
        assert observed.routes.counts.sum() == 3 * 2 * 2


def test_engine_on_a_freshly_written_image(tmp_path):
    image = write_tiny_image(tmp_path / "m.bin", seed=99)
    with Engine(image, threads=1) as engine:
        row = engine.forward([0])
        assert np.isfinite(row).all() and engine.argmax(row) == int(np.argmax(row))
        assert engine.argmax(np.array([np.nan, 1.0, 1.0], np.float32)) == 1
