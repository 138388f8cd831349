"""colibri_status, the core's pinned status codes (sdk/include/colibri.h is
the source; tests/tools/test_status.py checks this copy against it)."""
from __future__ import annotations

from enum import IntEnum


class Status(IntEnum):
    OK = 0
    E_BAD_ARGUMENT = 1
    E_BAD_MAGIC = 2
    E_UNSUPPORTED_VERSION = 3
    E_TRUNCATED = 4
    E_CHECKSUM = 5
    E_OUT_OF_RANGE = 6
    E_MISALIGNED = 7
    E_UNSUPPORTED_ARCH = 8
    E_UNSUPPORTED_ROUTER = 9
    E_CONFIG_MISMATCH = 10
    E_TOKEN_OUT_OF_RANGE = 11
    E_CONTEXT_FULL = 12
    E_WORKSPACE_TOO_SMALL = 13
    E_BAD_HYPERPARAMS = 14
    E_UNSUPPORTED_DTYPE = 15
    E_BAD_TENSOR_TABLE = 16
    E_BAD_SHAPE = 17
    E_OVERLAP = 18
    E_BAD_LAYER_TABLE = 19
    E_SIGNATURE = 20
    E_BAD_KEY = 21
    E_UNSIGNED = 22
    E_BAD_SIGNATURE_BLOCK = 23
    E_HASH_MISMATCH = 24
    E_WRONG_KEY = 25
    E_NO_SLOT = 26
    E_FLASH = 27
    E_SLOT_TOO_SMALL = 28
    E_UPDATE_ORDER = 29
    E_ROLLBACK = 30
    E_QUANT_SIZE = 31
    E_QUANT_BLOCKS = 32
    E_QUANT_SCALE = 33
    E_EXPERT_UNAVAILABLE = 34
    E_RESERVED = 35
    E_UPDATE_MISMATCH = 36
    E_LAST_IMAGE = 37
    E_ROUTER_FAILED = 38
    E_BAD_ROUTE = 39

    @property
    def c_name(self) -> str:
        return f"COLIBRI_{self.name}"


def status_name(status: int) -> str:
    """'COLIBRI_E_CHECKSUM (5)'; a value the enum lacks reads 'unknown status (N)'."""
    try:
        return f"{Status(status).c_name} ({status})"
    except ValueError:
        return f"unknown status ({status})"
