"""colibri_expert_block and colibri_verify_expert_block (sdk/include/colibri.h),
through the engine's library: every block where the Python image reader
(an independent reading of the format) says it is, a non-MoE layer or an
index out of range refused, and a copy of a block checked against the
image's CRC-32s (a flipped bit in any of its three tensors is found)."""
from __future__ import annotations

import ctypes

import numpy as np
from colibri_tools.image.image_reader import read_image
from colibri_tools.runtime.engine import Engine

BAD_ARGUMENT = 1


def _declare(lib):
    lib.colibri_expert_block.restype = ctypes.c_int
    lib.colibri_expert_block.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                                         ctypes.POINTER(ctypes.c_uint64),
                                         ctypes.POINTER(ctypes.c_size_t)]
    lib.colibri_verify_expert_block.restype = ctypes.c_int
    lib.colibri_verify_expert_block.argtypes = [ctypes.c_void_p, ctypes.c_uint32,
                                                ctypes.c_uint32, ctypes.c_void_p]


def test_blocks_where_the_reader_says_and_checked_copies(tiny_image):
    from colibri_tools.image.status import Status

    blocks = read_image(tiny_image).expert_blocks()
    data = np.fromfile(tiny_image, np.uint8)
    with Engine(tiny_image) as engine:
        lib, model = engine._lib, ctypes.addressof(engine._model)
        _declare(lib)
        offset, size = ctypes.c_uint64(), ctypes.c_size_t()
        for b in blocks:
            assert lib.colibri_expert_block(model, b.layer, b.expert, ctypes.byref(offset),
                                            ctypes.byref(size)) == 0
            assert (offset.value, size.value) == (b.offset, b.size)
            copy = np.array(data[b.offset:b.offset + b.size])
            assert lib.colibri_verify_expert_block(model, b.layer, b.expert,
                                                   copy.ctypes.data) == 0
            for at in (0, b.size // 2, b.size - 1):  # in the gate, the up, the down matrix
                bad = copy.copy()
                bad[at] ^= 0x04
                assert lib.colibri_verify_expert_block(model, b.layer, b.expert,
                                                       bad.ctypes.data) == \
                    Status.E_CHECKSUM.value
        layers = engine.hparams["n_layers"]
        experts = engine.hparams["n_experts"]
        for layer, expert in ((layers, 0), (0, experts)):
            assert lib.colibri_expert_block(model, layer, expert, None, None) == BAD_ARGUMENT
        assert lib.colibri_verify_expert_block(model, 0, 0, None) == BAD_ARGUMENT
