"""The Linux port's expert cache for :class:`~.engine.Engine` (``memory_budget``,
``expert_slots``; docs/linux.md, Models larger than memory): the ctypes
mirrors of its structs (checked field by field against the C compiler with the
engine's), the budget split (the C library's, colibri_linux_budget_slots, so
colibri-run and the Engine size a budget alike) and the cache's life.
"""
from __future__ import annotations

import ctypes

_u32, _u64, _ptr = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p

FLAG_VERIFY = 0x4  # COLIBRI_LINUX_EXPERTS_VERIFY
FLAG_LRU = 0x8     # COLIBRI_LINUX_EXPERTS_LRU


class ExpertLayout(ctypes.Structure):
    _fields_ = [("expert_bytes", _u64), ("dense_bytes", _u64), ("block_max", ctypes.c_size_t),
                ("slot_bytes", ctypes.c_size_t), ("moe_layers", _u32), ("experts", _u32),
                ("min_slots", _u32)]


class ExpertConfig(ctypes.Structure):
    _fields_ = [("slots", _u32), ("io_threads", _u32), ("flags", ctypes.c_uint), ("read", _ptr)]


STAT_COUNTERS = ("acquires", "hits", "ahead", "waits", "misses", "reads", "bytes_read",
                 "stall_ns", "failures")


class ExpertStats(ctypes.Structure):
    _fields_ = [(name, _u64) for name in STAT_COUNTERS] + [
        ("slots", _u32), ("io_threads", _u32), ("direct", ctypes.c_int)]


STRUCTS = {"colibri_linux_expert_layout": ExpertLayout,
           "colibri_linux_expert_config": ExpertConfig,
           "colibri_linux_expert_stats": ExpertStats}


def signatures(p_model, p_mapping) -> dict:
    size_t, c_int = ctypes.c_size_t, ctypes.c_int
    return {
        "colibri_linux_expert_layout_of": (c_int, [p_model, ctypes.POINTER(ExpertLayout)]),
        "colibri_linux_budget_slots": (_u32, [ctypes.POINTER(ExpertLayout), _u64, _u64,
                                              ctypes.POINTER(_u64)]),
        "colibri_linux_experts_open": (c_int, [ctypes.POINTER(_ptr), p_mapping, p_model,
                                               ctypes.POINTER(ExpertConfig), ctypes.c_char_p,
                                               size_t]),
        "colibri_linux_experts_close": (None, [_ptr]),
        "colibri_linux_experts_stats": (None, [_ptr, ctypes.POINTER(ExpertStats)]),
        "colibri_linux_experts_error": (c_int, [_ptr, ctypes.c_char_p, size_t]),
    }


class ExpertCache:
    """An open cache (colibri_linux_experts_open). `problem` raises the
    caller's error type: problem(message, linux_status_number)."""

    def __init__(self, lib, mapping, model, *, budget: int | None, slots: int | None,
                 held_bytes: int, io_threads: int, verify: bool, lru: bool, problem) -> None:
        self._lib = lib
        self.handle = _ptr()
        self.layout = ExpertLayout()
        status = lib.colibri_linux_expert_layout_of(model, ctypes.byref(self.layout))
        if status != 0:
            raise problem("the model has no routed experts to read from storage", status)
        if slots is None:
            minimum = _u64(0)
            slots = lib.colibri_linux_budget_slots(ctypes.byref(self.layout), budget, held_bytes,
                                                   ctypes.byref(minimum))
            if slots == 0:
                raise problem(f"memory_budget {budget} bytes is below this model's minimum of "
                              f"{minimum.value} bytes (dense part {self.layout.dense_bytes}, "
                              f"buffers {held_bytes}, {self.layout.min_slots} expert slots of "
                              f"{self.layout.slot_bytes})", 16)
        every = self.layout.moe_layers * self.layout.experts
        cfg = ExpertConfig(min(int(slots), every), int(io_threads),
                           (FLAG_VERIFY if verify else 0) | (FLAG_LRU if lru else 0), None)
        err = ctypes.create_string_buffer(1024)
        status = lib.colibri_linux_experts_open(ctypes.byref(self.handle), mapping, model,
                                                ctypes.byref(cfg), err, 1024)
        if status != 0:
            raise problem(err.value.decode(errors="replace"), status)

    def stats(self) -> dict[str, int]:
        s = ExpertStats()
        self._lib.colibri_linux_experts_stats(self.handle, ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in ExpertStats._fields_}

    def error(self) -> str:
        """The last failed read as one line ('' if none failed)."""
        line = ctypes.create_string_buffer(512)
        self._lib.colibri_linux_experts_error(self.handle, line, 512)
        return line.value.decode(errors="replace")

    def close(self) -> None:
        if self.handle:
            self._lib.colibri_linux_experts_close(self.handle)
            self.handle = _ptr()
