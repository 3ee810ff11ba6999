"""The JS client mints ids on plain HTTP pages too, where ``crypto.randomUUID`` does not exist (issue 19, 7)."""

from __future__ import annotations

import re

from tests.browser.jsrun import run_module


def test_message_ids_and_request_keys_without_random_uuid():
    ids = run_module(
        """
        Object.defineProperty(globalThis.crypto, "randomUUID", { value: undefined, configurable: true });
        const { newMessageId, newRequestKey } = await import(`${STATIC}/client.js`);
        const minted = [newMessageId(), newMessageId(), newRequestKey()];
        console.log(JSON.stringify(minted));
        """,
        None,
    )
    assert re.fullmatch(r"msg_[0-9a-f]{32}", ids[0]) and re.fullmatch(r"msg_[0-9a-f]{32}", ids[1])
    assert re.fullmatch(r"rk_[0-9a-f]{32}", ids[2])
    assert ids[0] != ids[1]
