"""The C engine in this Python process: a ctypes binding of libcolibri and the
Linux port library (libcolibri_linux), the same code colibri-run runs.

    from colibri_tools.runtime.engine import Engine

    with Engine("out/model/model.bin", threads=2) as engine:
        last = engine.forward([1, 450, 4996])            # float32 [vocab]: the last id's logits
        rows = engine.forward([1, 2], logits="all")      # [2, vocab], positions 3 and 4
        engine.reset()                                   # forget every position
        ids = engine.greedy([1, 450, 4996], 16)          # colibri-run's decode loop

Which library: ``$COLIBRI_LIB`` (the libcolibri_linux shared object, or the
directory holding it), else the copy inside this package (a wheel carries the
libraries built for its platform, so installing needs no compiler), else the
source tree's ``build/host`` (``make host``; an editable install), else one
the system's loader finds (``make install`` into a library directory). The
library must report this package's C version (:data:`C_VERSION_NUMBER`).

Errors are :class:`EngineError` with the C status's name (``status``, e.g.
``"COLIBRI_E_CHECKSUM"``, or the Linux port's ``"COLIBRI_LINUX_E_TRUNCATED"``)
and number (``code``). The struct layouts below mirror sdk/include/colibri.h
and ports/linux/colibri_linux.h; tests/tools/test_engine.py compares every
field's offset with what a C compiler says.

Everything the core does not own is this object's: the mapping, the thread
pool, the KV state, the scratch and the logits. One call at a time per
Engine (the core's contract: one state per caller).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import ColibriError
from ..image.status import Status
from . import engine_experts
from .engine_experts import ExpertCache
from .engine_routes import ROUTER_FN, Routes, router_fn

C_VERSION_NUMBER = 100  # COLIBRI_VERSION_NUMBER this binding mirrors (0.1.0)
PORT_VERSION = 6        # COLIBRI_PORT_VERSION of the colibri_port mirrored here
LIB_ENV = "COLIBRI_LIB"
LIB_NAME = "libcolibri_linux.so"
DEFAULT_CONTEXT = 2048  # colibri-run's default (docs/linux.md)
DEFAULT_BATCH = 32      # colibri-run's --batch default
MAX_BATCH = 256         # COLIBRI_MAX_BATCH
BUFFER_ALIGN = 64
ERR_BYTES = 1024
MAP_MLOCK, MAP_NO_FLOCK, MAP_POPULATE = 0x1, 0x2, 0x4
LOGITS_MODES = {"last": 0, "all": 1, "none": 2}

LINUX_STATUS = ("OK", "E_BAD_ARGUMENT", "E_OPEN", "E_NOT_REGULAR", "E_EMPTY", "E_TOO_SMALL",
                "E_TOO_LARGE", "E_BAD_MAGIC", "E_TRUNCATED", "E_LOCKED", "E_READ", "E_MMAP",
                "E_MLOCK_LIMIT", "E_MLOCK", "E_THREAD", "E_NO_EXPERTS", "E_BUDGET")


class EngineError(ColibriError):
    """The engine refused or failed. `status` names the C status
    (``COLIBRI_E_...`` or ``COLIBRI_LINUX_E_...``) and `code` is its number;
    both are None for what no C status describes (no library found, a model
    file rewritten while in use)."""

    def __init__(self, message: str, *, status: str | None, code: int | None,
                 path: str | os.PathLike[str] | None = None) -> None:
        self.status = status
        self.code = code
        super().__init__(f"{message} [{status}]" if status else message, path=path)


# ---- the C structs, field for field ---------------------------------------------------

_u32, _f32, _ptr = ctypes.c_uint32, ctypes.c_float, ctypes.c_void_p
_HPARAMS_FLOATS = {"rms_eps", "rope_theta", "routed_scaling", "embedding_scale", "residual_scale",
                   "attention_scale", "logits_divisor", "router_jitter", "router_norm_min",
                   "swiglu_limit", "swiglu_alpha", "rope_factor", "rope_ramp_low",
                   "rope_ramp_width", "rope_attn_factor", "lora_eps", "qkv_clip",
                   "attn_temp_floor", "attn_temp_scale", "router_sum_eps", "kda_bound",
                   "ssm_dt_min"}
HPARAMS_FIELDS = ("arch", "vocab_size", "hidden_size", "n_layers", "n_heads", "n_kv_heads",
                  "head_dim", "max_context", "dense_intermediate", "expert_intermediate",
                  "n_experts", "shared_intermediate", "rms_eps", "rope_theta", "attn_bias",
                  "qk_norm", "tie_embeddings", "router_score", "top_k", "router_norm_topk",
                  "routed_scaling", "shared_gate", "n_group", "topk_group", "alignment",
                  "embedding_scale", "residual_scale", "attention_scale", "logits_divisor",
                  "norm_kind", "router_jitter", "quantized", "router_norm_min", "rope_dim",
                  "rope_kind", "rope_factor", "rope_ramp_low", "rope_ramp_width",
                  "rope_attn_factor", "sliding_window", "activation", "swiglu_limit",
                  "swiglu_alpha", "mla", "q_lora_rank", "kv_lora_rank", "v_head_dim",
                  "lora_eps", "qkv_clip", "attn_temp_floor", "attn_temp_scale", "zero_experts",
                  "shortcut_layers", "layer_rope", "conv_kernel", "conv_layers", "kv_layers",
                  "router_sum_eps", "ssm_heads", "ssm_head_dim", "ssm_state", "ssm_groups",
                  "kda_rank", "ssm_dt_rank", "kda_bound", "ssm_dt_min", "kv_int8")
KERNEL_SLOTS = ("dot", "matvec_f32", "rmsnorm", "softmax", "swiglu", "add", "add_scaled",
                "rope_apply", "matmat_f32", "matmat_q8", "matmat_q4", "matmat_q8r16",
                "matmat_q4r16", "matmat_qk", "matmat_qkr16")

ROUTE_FN = ctypes.CFUNCTYPE(None, _ptr, _u32, _u32, _u32, _u32, ctypes.POINTER(_u32),
                            ctypes.POINTER(_f32))


class HParams(ctypes.Structure):
    _fields_ = [(name, _f32 if name in _HPARAMS_FLOATS else _u32) for name in HPARAMS_FIELDS]


class Kernels(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p)] + [(slot, _ptr) for slot in KERNEL_SLOTS]


class Port(ctypes.Structure):
    _fields_ = [("version", _u32), ("ticks", _ptr), ("prefetch", _ptr), ("ctx", _ptr),
                ("parallel_for", _ptr), ("kernels", ctypes.POINTER(Kernels)),
                ("route", ROUTE_FN), ("route_ctx", _ptr), ("expert_acquire", _ptr),
                ("expert_release", _ptr), ("experts_chosen", _ptr), ("attention_route", ROUTE_FN),
                ("router", ROUTER_FN)]


class Model(ctypes.Structure):
    _fields_ = [("image", _ptr), ("image_size", ctypes.c_uint64),
                ("resident_size", ctypes.c_uint64), ("layer_table", _ptr),
                ("tensor_table", _ptr), ("n_tensors", _u32), ("fingerprint", _u32),
                ("hp", HParams), ("token_embed", _ptr), ("output_norm", _ptr), ("lm_head", _ptr),
                ("output_norm_bias", _ptr), ("lm_head_bias", _ptr),
                ("port", Port), ("kernels", Kernels)]


class State(ctypes.Structure):
    _fields_ = [("k_cache", _ptr), ("v_cache", _ptr), ("conv_state", _ptr), ("max_context", _u32),
                ("pos", _u32), ("fingerprint", _u32), ("conv_copy", _u32)]


class Options(ctypes.Structure):
    _fields_ = [("expected_fingerprint", _u32), ("port", ctypes.POINTER(Port))]


class Mapping(ctypes.Structure):
    _fields_ = [("data", _ptr), ("size", ctypes.c_size_t), ("image_size", ctypes.c_uint64),
                ("page_size", ctypes.c_size_t), ("fd", ctypes.c_int), ("locked", ctypes.c_int),
                ("populated", ctypes.c_int), ("flocked", ctypes.c_int),
                ("mtime_ns", ctypes.c_int64)]


class PortCtx(ctypes.Structure):
    _fields_ = [("map", ctypes.POINTER(Mapping)), ("pool", _ptr), ("experts", _ptr)]


STRUCTS = {"colibri_hparams": HParams, "colibri_kernels": Kernels, "colibri_port": Port,
           "colibri_model": Model, "colibri_state": State, "colibri_options": Options,
           "colibri_linux_mapping": Mapping, "colibri_linux_port_ctx": PortCtx,
           **engine_experts.STRUCTS}

# Room after the model struct: a newer library may have grown its port or
# record (its version check refuses it first; this is the belt to those braces).
_MODEL_SLACK = 4096


# ---- finding and loading the library ---------------------------------------------------

def package_library() -> Path:
    """Where a wheel keeps its copy of the library."""
    return Path(__file__).resolve().parents[1] / "lib" / f"{LIB_NAME}.0"


def source_tree_library() -> Path | None:
    """build/host/libcolibri_linux.so when this package sits in a Colibri source tree."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "sdk" / "include" / "colibri.h").is_file():
        return None
    return root / "build" / "host" / LIB_NAME


def library_candidates(environ: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(where it came from, path or name) in the order they are tried."""
    env = os.environ if environ is None else environ
    found: list[tuple[str, str]] = []
    if env.get(LIB_ENV):
        path = Path(env[LIB_ENV])
        return [(f"${LIB_ENV}", str(path / LIB_NAME if path.is_dir() else path))]
    found.append(("the package", str(package_library())))
    tree = source_tree_library()
    if tree is not None:
        found.append(("the source tree (make host)", str(tree)))
    system = ctypes.util.find_library("colibri_linux")
    if system:
        found.append(("the system's library path", system))
    return found


def _declare(lib: ctypes.CDLL) -> None:
    size_t, c_int = ctypes.c_size_t, ctypes.c_int
    p_model, p_state = ctypes.POINTER(Model), ctypes.POINTER(State)
    signatures = {
        "colibri_version": (_u32, []),
        "colibri_strerror": (ctypes.c_char_p, [c_int]),
        "colibri_init": (c_int, [p_model, _ptr, size_t, ctypes.POINTER(Options)]),
        "colibri_verify": (c_int, [p_model, ctypes.POINTER(_u32)]),
        "colibri_state_size": (size_t, [p_model, _u32]),
        "colibri_scratch_size_batch": (size_t, [p_model, _u32, _u32]),
        "colibri_state_init": (c_int, [p_state, p_model, _ptr, size_t, _u32]),
        "colibri_state_reset": (None, [p_state]),
        "colibri_forward": (c_int, [p_model, p_state, ctypes.POINTER(ctypes.c_int32), _u32,
                                    _ptr, c_int, _ptr, size_t, ctypes.POINTER(ctypes.c_uint64)]),
        "colibri_argmax": (_u32, [ctypes.POINTER(_f32), _u32]),
        "colibri_linux_map": (c_int, [ctypes.POINTER(Mapping), ctypes.c_char_p, ctypes.c_uint,
                                      ctypes.c_char_p, size_t]),
        "colibri_linux_unmap": (None, [ctypes.POINTER(Mapping)]),
        "colibri_linux_changed": (c_int, [ctypes.POINTER(Mapping)]),
        "colibri_linux_pool_start": (_ptr, [_u32]),
        "colibri_linux_pool_stop": (None, [_ptr]),
        "colibri_linux_pool_threads": (_u32, [_ptr]),
        "colibri_linux_cpu_count": (_u32, []),
        "colibri_linux_port_init": (None, [ctypes.POINTER(Port), ctypes.POINTER(PortCtx)]),
        "colibri_linux_kernels": (ctypes.POINTER(Kernels), [ctypes.c_char_p]),
        "colibri_linux_kernel_names": (size_t, [ctypes.c_char_p, size_t]),
    }
    signatures.update(engine_experts.signatures(p_model, ctypes.POINTER(Mapping)))
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes


_LOADED: dict[str, tuple[ctypes.CDLL, str]] = {}


def load_library(environ: dict[str, str] | None = None) -> tuple[ctypes.CDLL, str]:
    """(the loaded library, its path), found as the module docstring says."""
    tried = []
    for source, path in library_candidates(environ):
        if path in _LOADED:
            return _LOADED[path]
        if os.sep in path and not Path(path).is_file():
            tried.append(f"{path} ({source}): no such file")
            continue
        try:
            lib = ctypes.CDLL(path)
            _declare(lib)
        except (OSError, AttributeError) as exc:
            tried.append(f"{path} ({source}): {exc}")
            continue
        version = lib.colibri_version()
        if version != C_VERSION_NUMBER:
            tried.append(f"{path} ({source}): C library version {version}, this binding "
                         f"needs {C_VERSION_NUMBER}")
            continue
        _LOADED[path] = (lib, path)
        return lib, path
    raise EngineError("cannot load the Colibri engine library; tried:\n  " + "\n  ".join(tried) +
                      f"\n(build it with `make host` in a Colibri checkout, install the "
                      f"colibri-tools wheel, or point ${LIB_ENV} at {LIB_NAME})",
                      status=None, code=None)


def kernel_names(environ: dict[str, str] | None = None) -> list[str]:
    """The kernel tables the loaded library has (docs/kernels.md)."""
    lib, _ = load_library(environ)
    buf = ctypes.create_string_buffer(256)
    lib.colibri_linux_kernel_names(buf, len(buf))
    return [n.strip() for n in buf.value.decode().split(",") if n.strip()]


def _aligned(nbytes: int, dtype=np.uint8) -> np.ndarray:
    """A zeroed numpy buffer of at least nbytes whose data is BUFFER_ALIGN-aligned."""
    raw = np.zeros(nbytes + BUFFER_ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % BUFFER_ALIGN
    return raw[start:start + nbytes].view(dtype)


class Engine:
    """A model image mapped and initialised, with its own KV state, scratch,
    thread pool and logits buffer (module docstring)."""

    def __init__(self, path: str | os.PathLike[str], *, context: int | None = None,
                 threads: int | None = None, batch: int = DEFAULT_BATCH,
                 kernels: str | Kernels | None = None, mlock: bool = False,
                 preload: bool = False, verify: bool = False, fingerprint: int = 0,
                 routes: bool = False, router=None,
                 lock: bool = True, memory_budget: int | None = None,
                 expert_slots: int | None = None, io_threads: int = 4,
                 cache_policy: str = "quota") -> None:
        self.path = Path(path)
        self._lib, self.library_path = load_library()
        self._map = Mapping()
        self._mapped = False
        self._pool = None
        self._closed = False
        self.experts: ExpertCache | None = None
        self._router_fn = router_fn(router)  # engine_routes.router_fn: the port's router
        try:
            self._open(context, threads, batch, kernels, mlock, preload, verify, fingerprint,
                       routes, lock)
            if memory_budget is not None or expert_slots is not None:
                self._open_experts(memory_budget, expert_slots, io_threads, verify,
                                   cache_policy, fingerprint)
        except BaseException:
            self.close()
            raise

    # -- set-up --------------------------------------------------------------------------

    def _fail(self, what: str, status: int) -> EngineError:
        text = self._lib.colibri_strerror(status).decode()
        try:
            name = Status(status).c_name
        except ValueError:
            name = f"COLIBRI_STATUS_{status}"
        return EngineError(f"{what}: {text} (status {status})", status=name, code=status,
                           path=self.path)

    def _map_file(self, mlock: bool, preload: bool, lock: bool) -> None:
        err = ctypes.create_string_buffer(ERR_BYTES)
        flags = (MAP_MLOCK if mlock else 0) | (MAP_POPULATE if preload else 0) | \
            (0 if lock else MAP_NO_FLOCK)
        status = self._lib.colibri_linux_map(ctypes.byref(self._map), os.fsencode(self.path),
                                             flags, err, ERR_BYTES)
        if status != 0:
            name = LINUX_STATUS[status] if status < len(LINUX_STATUS) else f"E_{status}"
            raise EngineError(err.value.decode(errors="replace"), status=f"COLIBRI_LINUX_{name}",
                              code=status)
        self._mapped = True

    def _port(self, threads: int | None, kernels: str | Kernels | None, routes: bool) -> None:
        lib = self._lib
        n = lib.colibri_linux_cpu_count() if threads is None else int(threads)
        if not 1 <= n <= 64:
            raise EngineError(f"threads must be 1 .. 64, got {n}", status="COLIBRI_E_BAD_ARGUMENT",
                              code=1)
        if n > 1:
            self._pool = lib.colibri_linux_pool_start(n)
            if not self._pool:
                raise EngineError(f"cannot start {n} threads", status="COLIBRI_E_BAD_ARGUMENT",
                                  code=1)
        self._port_ctx = PortCtx(ctypes.pointer(self._map), self._pool)
        self._port_struct = Port()
        lib.colibri_linux_port_init(ctypes.byref(self._port_struct), ctypes.byref(self._port_ctx))
        if isinstance(kernels, Kernels):  # a table of the caller's (kept alive by it)
            self._port_struct.kernels = ctypes.pointer(kernels)
        elif kernels is not None:
            table = lib.colibri_linux_kernels(kernels.encode())
            if not table:
                raise EngineError(f"no kernel table '{kernels}' runs here (this library has: "
                                  f"{', '.join(kernel_names())})", status="COLIBRI_E_BAD_ARGUMENT",
                                  code=1)
            self._port_struct.kernels = table
        self._route_fn = ROUTE_FN(self._on_route) if routes else ROUTE_FN()
        self._attention_route_fn = ROUTE_FN(self._on_attention_route) if routes else ROUTE_FN()
        self._port_struct.route = self._route_fn
        self._port_struct.attention_route = self._attention_route_fn
        self._port_struct.router = self._router_fn

    def _open(self, context, threads, batch, kernels, mlock, preload, verify, fingerprint,
              routes, lock) -> None:
        lib = self._lib
        self._map_file(mlock, preload, lock)
        self._port(threads, kernels, routes)
        self._model_buf = _aligned(ctypes.sizeof(Model) + _MODEL_SLACK)
        self._model = Model.from_address(self._model_buf.ctypes.data)
        options = Options(int(fingerprint) & 0xFFFFFFFF, ctypes.pointer(self._port_struct))
        status = lib.colibri_init(ctypes.byref(self._model), self._map.data, self._map.size,
                                  ctypes.byref(options))
        if status != 0:
            raise self._fail("cannot load the model image", status)
        if verify:
            bad = _u32(0)
            status = lib.colibri_verify(ctypes.byref(self._model), ctypes.byref(bad))
            if status != 0:
                raise self._fail(f"the image failed verification (tensor table entry "
                                 f"{bad.value})", status)
        hp = self._model.hp
        self.context = min(hp.max_context, DEFAULT_CONTEXT) if context is None else int(context)
        if not 1 <= self.context <= hp.max_context:
            raise EngineError(f"context {self.context} is outside 1 .. the model's max_context "
                              f"{hp.max_context}", status="COLIBRI_E_BAD_ARGUMENT", code=1)
        if not 1 <= batch <= MAX_BATCH:
            raise EngineError(f"batch must be 1 .. {MAX_BATCH}, got {batch}",
                              status="COLIBRI_E_BAD_ARGUMENT", code=1)
        self.batch = int(batch)
        self._buffers(routes)

    def _buffers(self, routes: bool) -> None:
        lib, model, hp = self._lib, ctypes.byref(self._model), self._model.hp
        self.state_bytes = lib.colibri_state_size(model, self.context)
        self.scratch_bytes = lib.colibri_scratch_size_batch(model, self.context, self.batch)
        self._kv = _aligned(self.state_bytes)
        self._scratch = _aligned(self.scratch_bytes)
        self._logits = _aligned(4 * hp.vocab_size, np.float32)
        self._logits_f32 = self._logits.ctypes.data_as(ctypes.POINTER(_f32))
        self._one_id = (ctypes.c_int32 * 1)()  # a decode step's id, without numpy
        self._ticks = ctypes.c_uint64(0)
        self._state = State()
        self._call_args = (ctypes.byref(self._model), ctypes.byref(self._state),
                           self._scratch.ctypes.data, ctypes.byref(self._ticks))
        self._map_ref = ctypes.byref(self._map)
        status = lib.colibri_state_init(ctypes.byref(self._state), model, self._kv.ctypes.data,
                                        self.state_bytes, self.context)
        if status != 0:
            raise self._fail("cannot set up the KV state", status)
        self.routes: Routes | None = None
        if routes:
            self.routes = Routes.sized(hp.n_layers, hp.n_experts, hp.top_k, self.context)

    def _open_experts(self, budget, slots, io_threads, verify, policy, fingerprint) -> None:
        """The expert cache (docs/linux.md, Models larger than memory): sized by the
        budget (which counts the mapped dense part, the KV state, scratch and logits,
        and the port's reserve; not this Python process) or by slots; then the port's
        expert slots on it and the model initialised again with them."""
        if (budget is None) == (slots is None) or policy not in ("quota", "lru") or \
                not 0 <= io_threads <= 16 or (slots is not None and slots < 1) or \
                (budget is not None and budget < 1):
            raise EngineError("give memory_budget (bytes) or expert_slots, not both; "
                              "io_threads 0 .. 16; cache_policy quota or lru",
                              status="COLIBRI_E_BAD_ARGUMENT", code=1)

        def problem(message: str, status: int) -> EngineError:
            name = LINUX_STATUS[status] if status < len(LINUX_STATUS) else f"E_{status}"
            return EngineError(message, status=f"COLIBRI_LINUX_{name}", code=status,
                               path=self.path)

        held = self.state_bytes + self.scratch_bytes + self._logits.nbytes
        self.experts = ExpertCache(self._lib, ctypes.byref(self._map), ctypes.byref(self._model),
                                   budget=budget, slots=slots, held_bytes=held,
                                   io_threads=io_threads, verify=verify, lru=policy == "lru",
                                   problem=problem)
        self._port_ctx.experts = self.experts.handle
        fresh = Port()
        self._lib.colibri_linux_port_init(ctypes.byref(fresh), ctypes.byref(self._port_ctx))
        for slot in ("expert_acquire", "expert_release", "experts_chosen"):
            setattr(self._port_struct, slot, getattr(fresh, slot))
        options = Options(int(fingerprint) & 0xFFFFFFFF, ctypes.pointer(self._port_struct))
        status = self._lib.colibri_init(ctypes.byref(self._model), self._map.data,
                                        self._map.size, ctypes.byref(options))
        if status != 0:
            raise self._fail("cannot load the model with the expert cache", status)

    def _on_route(self, _ctx, layer, pos, n_tokens, top_k, experts, weights) -> None:
        self.routes.record(layer, pos, n_tokens, top_k, experts, weights)

    def _on_attention_route(self, _ctx, layer, _pos, n_tokens, top_k, experts, _weights) -> None:
        self.routes.record_attention(layer, n_tokens, top_k, experts)

    # -- what the model is ---------------------------------------------------------------

    @property
    def hparams(self) -> dict[str, float | int]:
        hp = self._model.hp
        return {name: getattr(hp, name) for name in HPARAMS_FIELDS}

    @property
    def vocab_size(self) -> int:
        return self._model.hp.vocab_size

    @property
    def fingerprint(self) -> int:
        return self._model.fingerprint

    @property
    def image_address(self) -> int:
        """Where the image is mapped in this process."""
        return int(self._map.data or 0)

    @property
    def kernels(self) -> str:
        return self._model.kernels.name.decode()

    @property
    def threads(self) -> int:
        return self._lib.colibri_linux_pool_threads(self._pool)

    @property
    def pos(self) -> int:
        """Positions of the KV state filled so far."""
        return self._state.pos

    # -- running -------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget every position (colibri_state_reset); routes recorded stay until overwritten."""
        self._check_open()
        self._lib.colibri_state_reset(ctypes.byref(self._state))

    def forward(self, ids: Sequence[int], *, logits: str = "last") -> np.ndarray | None:
        """Run ids at positions pos.. onward. logits: "last" (a copy of the last id's
        [vocab] float32 row), "all" ([n, vocab]) or "none" (None: the KV state only)."""
        self._check_open()
        if logits not in LOGITS_MODES:
            raise ValueError(f"logits must be one of {', '.join(LOGITS_MODES)}, got {logits!r}")
        vocab = self.vocab_size
        if len(ids) == 1 and type(ids[0]) is int and -(1 << 31) <= ids[0] < 1 << 31:
            self._one_id[0], n, id_ptr = ids[0], 1, self._one_id  # the decode step's fast path
        else:
            arr = self._ids(ids)
            n, id_ptr = len(arr), arr.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        out = self._logits if logits != "all" else _aligned(4 * vocab * max(n, 1), np.float32)
        self._run(id_ptr, n, out.ctypes.data if logits != "none" else None, LOGITS_MODES[logits])
        if logits == "none":
            return None
        return out.reshape(n, vocab).copy() if logits == "all" else out.copy()

    def _run(self, id_ptr, n: int, out_ptr, mode: int) -> None:
        model, state, scratch, ticks = self._call_args
        status = self._lib.colibri_forward(model, state, id_ptr, n, out_ptr, mode, scratch,
                                           self.scratch_bytes, ticks)
        if status != 0:
            line = self.experts.error() if self.experts else ""
            why = f" ({line})" if line else ""
            raise self._fail(f"forward pass over {n} ids at position {self.pos} failed{why}",
                             status)
        self.last_ticks = self._ticks.value
        self._check_unchanged()

    def _step(self, token: int) -> int:
        """One decode step of the greedy loop: feed token, return the argmax (no copies)."""
        self._check_open()
        self._one_id[0] = token
        self._run(self._one_id, 1, self._logits.ctypes.data, LOGITS_MODES["last"])
        return int(self._lib.colibri_argmax(self._logits_f32, self.vocab_size))

    def argmax(self, values: np.ndarray) -> int:
        """colibri_argmax: ties to the lowest id, NaN below every number."""
        v = np.ascontiguousarray(values, dtype=np.float32)
        return int(self._lib.colibri_argmax(v.ctypes.data_as(ctypes.POINTER(_f32)), v.size))

    def greedy(self, ids: Sequence[int], gen: int) -> list[int]:
        """colibri-run's loop: the prompt from a fresh state, then gen tokens, each
        the argmax of the last logits, fed back one at a time."""
        self.reset()
        out: list[int] = []
        if gen <= 0:
            self.forward(ids, logits="none")
            return out
        out.append(self.argmax(self.forward(ids)))
        while len(out) < gen:
            out.append(self._step(out[-1]))
        return out

    def timed_greedy(self, ids: Sequence[int], gen: int) -> tuple[list[int], int, list[int]]:
        """greedy() with times: (ids, prompt ns, ns of each decode step)."""
        self.reset()
        start = time.perf_counter_ns()
        last = self.forward(ids)
        prompt_ns = time.perf_counter_ns() - start
        out, steps = [self.argmax(last)], []
        for _ in range(gen - 1):
            start = time.perf_counter_ns()
            token = self._step(out[-1])
            steps.append(time.perf_counter_ns() - start)
            out.append(token)
        return out, prompt_ns, steps

    def _ids(self, ids: Sequence[int]) -> np.ndarray:
        try:
            arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise EngineError(f"ids must be whole numbers: {exc}", status="COLIBRI_E_BAD_ARGUMENT",
                              code=1, path=self.path) from exc
        if arr.size == 0:
            raise EngineError("no ids to run", status="COLIBRI_E_BAD_ARGUMENT", code=1,
                              path=self.path)
        if arr.min() < -(1 << 31) or arr.max() >= 1 << 31:
            raise self._fail("an id does not fit in int32", int(Status.E_TOKEN_OUT_OF_RANGE))
        return np.ascontiguousarray(arr, dtype=np.int32)

    def _check_open(self) -> None:
        if self._closed:
            raise EngineError("the engine is closed", status="COLIBRI_E_BAD_ARGUMENT", code=1,
                              path=self.path)

    def _check_unchanged(self) -> None:
        if self._lib.colibri_linux_changed(self._map_ref) == 1:
            raise EngineError("the model file was written while it was in use, so the results "
                              "may mix old and new weights; replace model files with rename()",
                              status=None, code=None, path=self.path)

    def close(self) -> None:
        """Stop the threads and unmap the image (safe to call twice)."""
        if self._closed:
            return
        self._closed = True
        if self.experts is not None:
            self.experts.close()
        if self._pool:
            self._lib.colibri_linux_pool_stop(self._pool)
            self._pool = None
        if self._mapped:
            self._lib.colibri_linux_unmap(ctypes.byref(self._map))
            self._mapped = False

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_lib", None) is not None:
            self.close()
