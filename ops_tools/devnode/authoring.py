"""Aura authoring: at each slot, the authority ``authorities[slot % n]`` builds and seals a block
if this node holds its aura key. The block goes through the same import as network blocks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ops_tools.chainspec.header import DIGEST_SEAL, DigestItem, Header
from ops_tools.devnode.chain import AURA, Chain, ImportError_, seal_digest, short, slot_of
from ops_tools.devnode.keystore import Keystore
from ops_tools.devnode.pool import Pool
from ops_tools.devnode.runtime.executive import execute_block

log = logging.getLogger("devnode")


class Author:
    def __init__(
        self, chain: Chain, pool: Pool, keystore: Keystore, is_syncing: Callable[[], bool]
    ) -> None:
        self.chain, self.pool, self.keystore = chain, pool, keystore
        self.is_syncing = is_syncing

    def local_authorities(self) -> list[bytes]:
        return [a for a in self.chain.config.aura_authorities if self.keystore.has("aura", a)]

    async def run(self) -> None:
        duration = self.chain.config.slot_duration
        while True:
            now = time.time() * 1000
            slot = int(now // duration) + 1
            await asyncio.sleep((slot * duration - now) / 1000)
            try:
                self.author_slot(slot)
            except ImportError_ as exc:
                log.warning("❌ authored block failed import: %s", exc)

    def author_slot(self, slot: int) -> None:
        chain = self.chain
        parent = chain.best
        if slot <= slot_of(parent.header) or self.is_syncing():
            return
        authorities = chain.authorities_at(parent.hash)
        if not authorities:
            return
        author = authorities[slot % len(authorities)]
        if not self.keystore.has("aura", author):
            return
        pair = self.keystore.pair("aura", author, "Sr25519")
        if pair is None:
            log.warning("aura key %s in the keystore does not match its secret", author.hex())
            return
        log.info(
            "🙌 Starting consensus session on top of parent %s (#%d)",
            short(parent.hash),
            parent.number,
        )
        started = time.monotonic()
        state = chain.state(parent.hash)
        assert state is not None
        number = parent.number + 1
        result = execute_block(
            state,
            number=number,
            parent_hash=parent.hash,
            slot=slot,
            info=chain.info,
            config=chain.config,
            extrinsics=self.pool.ready(),
            block_hash_at=chain.canon_hash,
            skip_invalid=True,
        )
        for xt, exc in result.rejected:
            self.pool.drop(xt.hash, exc.reason)
        pre = Header(
            parent.hash, number, result.state_root, result.extrinsics_root, (seal_digest(slot),)
        )
        log.info(
            "🎁 Prepared block for proposing at %d (%d ms) "
            "[hash: 0x%s; parent_hash: %s; extrinsics (%d)]",
            number,
            (time.monotonic() - started) * 1000,
            pre.hash().hex(),
            short(parent.hash),
            len(result.extrinsics),
        )
        seal = DigestItem(DIGEST_SEAL, AURA, pair.sign(pre.hash()))
        header = Header(
            pre.parent_hash, number, pre.state_root, pre.extrinsics_root, (*pre.digest, seal)
        )
        log.info(
            "🔖 Pre-sealed block for proposal at %d. Hash now %s, previously %s.",
            number,
            short(header.hash()),
            short(pre.hash()),
        )
        chain.import_block(header, [x.encoded for x in result.extrinsics], "own", result)
