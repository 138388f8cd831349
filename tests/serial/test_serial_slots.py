"""SLOT_* requests (docs/serial-protocol.md 4.7) to a device without A/B
weight slots: each is ERROR NO_SLOTS and the device keeps serving; the
SLOT_STATE payload codec. Devices with slots: tests/ports/aarch64/test_aarch64_ota.py."""
from __future__ import annotations

import struct

import pytest
from colibri_tools.protocol import DeviceError
from colibri_tools.protocol.frames import ErrorCode, Msg, PayloadError
from colibri_tools.protocol.messages import SlotState


def test_device_without_slots_says_so(client):
    for request, payload in ((Msg.SLOT_STATUS, b""), (Msg.SLOT_BEGIN, struct.pack("<Q", 64)),
                             (Msg.SLOT_WRITE, bytes(12)), (Msg.SLOT_FINISH, bytes(4))):
        with pytest.raises(DeviceError) as caught:
            client.transact(request, payload)
        assert caught.value.code == ErrorCode.NO_SLOTS, request
    assert client.hello().init_status == 0


def test_slot_state_codec():
    state = SlotState(0, 1, 1, (3, 2), 9, (4, 9), (0x1234, 0xABCD), 0, (1, 2), 1 << 20)
    assert SlotState.unpack(state.pack()) == state
    assert "slot B: trying, fingerprint 0x0000ABCD, version 2" == state.describe(1)
    with pytest.raises(PayloadError):
        SlotState.unpack(state.pack()[:-1])
