"""A report request signed by the account it names: what lets the service count it against that
account's own limit instead of the client address's.

The signed message is ``ops_tools.chain.wire.attest_request`` (what the wallet signs, sr25519 as
``Keypair.sign`` produces), as the gateway verifies the wallet's heartbeat payload. The genesis
binds the signature to one network, ``signed_at`` to a window of ``MAX_SKEW_S`` either side of
the service's clock, and the nonce to one report: the service refuses a second request with the
same account and nonce inside that window (a replay), so an observed request cannot be used to
spend its account's limit.

Pure: the caller passes the clock and the genesis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sr25519
from scalecodec.utils.ss58 import ss58_decode

from ops_tools.attestation.inputs import SS58_PREFIX, FieldError
from ops_tools.chain.wire.attest_request import request_message

MAX_SKEW_S = 300
_U64_MAX = 2**64 - 1
_SIG_RE = re.compile(r"^0x[0-9a-fA-F]{128}$")


@dataclass(frozen=True)
class SignedBy:
    """A request whose signature verified for ``account``."""

    account: str
    nonce: bytes


def check(*, operator_id: str, account: str | None, nonce: bytes | None, signed_at: object,
          signature: object, genesis_hash: str, now: float) -> SignedBy:
    """The signer of a request that offers ``signature``, or FieldError naming what is wrong.

    ``account`` and ``nonce`` were validated by :mod:`inputs`; ``nonce`` is None when the client
    sent none (a signed request must choose its own)."""
    if account is None:
        raise FieldError("account", "a signed request names the account that signed it")
    if nonce is None:
        raise FieldError("nonce", "a signed request carries the nonce it signed")
    if not isinstance(signed_at, int) or isinstance(signed_at, bool) \
            or not 0 <= signed_at <= _U64_MAX:
        raise FieldError("signed_at", "give the signing time as unix seconds (an integer)")
    skew = signed_at - now
    if abs(skew) > MAX_SKEW_S:
        raise FieldError("signed_at", f"{signed_at} is {abs(skew):.0f} s"
                         f" {'ahead of' if skew > 0 else 'behind'} the service's clock; at most"
                         f" {MAX_SKEW_S} s: sign the request again now")
    if not isinstance(signature, str) or not _SIG_RE.fullmatch(signature):
        raise FieldError("signature", "is not 0x and 128 hex digits (an sr25519 signature)")
    account_id = bytes.fromhex(ss58_decode(account, valid_ss58_format=SS58_PREFIX))
    signed = request_message(genesis_hash, account_id, nonce, signed_at, operator_id)
    try:
        ok = bool(sr25519.verify(bytes.fromhex(signature[2:]), signed, account_id))
    except Exception:  # a public key that is no ristretto point, a malformed signature
        ok = False
    if not ok:
        raise FieldError("signature", f"does not verify for account {account} over this"
                         " request (operator_id, nonce, signed_at) on this network; sign it"
                         " with that account's key, see docs/attestation.md")
    return SignedBy(account, nonce)
