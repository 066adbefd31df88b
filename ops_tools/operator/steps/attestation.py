"""Step 4: an attestation report for the account, verified here before it is bound on chain.

The report comes from ``POST /v1/attest`` with a nonce of ours, signed by the account's key, so
that the service counts it against this account's own limit (nobody else's requests for our
name or from our address can exhaust it; ``wallet.attest`` checks the nonce, operator id and
account it answers); the verification is the attestation service's own
verifier (``/v1/verify``'s checks) run locally against the roots of ``GET /v1/roots`` and this
network's genesis. On the test network the roots are MOCK roots: accepted, and named as such.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
from cryptography import x509

from ops_tools.attestation.verify import Expected, Trust, verify_report
from ops_tools.errors import OpsError
from ops_tools.operator.context import Context
from ops_tools.operator.steps import Outcome, gone
from ops_tools.wallet import attest, operator

NAME = "attestation"
TITLE = "Attestation"


def fetch_roots(url: str, timeout: float) -> tuple[Trust, list[dict[str, Any]]]:
    try:
        response = httpx.get(f"{url}/v1/roots", timeout=timeout)
        response.raise_for_status()
        body = response.json()
        roots = [r for r in body["roots"] if r.get("mock")]
        certs = tuple(x509.load_pem_x509_certificate(r["pem"].encode()) for r in roots)
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        raise OpsError(f"attestation: {url}/v1/roots: cannot read the roots ({exc}); check"
                       " --attestation-url") from None
    # Only mock roots exist on this network; accepting them is what "test network" means here.
    return Trust(mock_roots=certs, accept_mock=True), roots


def run(ctx: Context) -> Outcome:
    opts, address = ctx.options, ctx.facts["account"]
    url = attest.resolve_url(opts.attestation_url)
    genesis = operator.genesis_hash(ctx.substrate())
    report = attest.request_report(url, opts.name, address, opts.rpc_timeout_s,
                                   signer=ctx.keypair(), genesis_hash=genesis).report
    trust, roots = fetch_roots(url, opts.rpc_timeout_s)
    verdict = verify_report(report, trust, now=dt.datetime.now(dt.UTC), genesis_hash=genesis,
                            expected=Expected(opts.name, address, report["nonce"]))
    if not verdict.valid:
        failed = "; ".join(f"{c.name}: {c.detail}" for c in verdict.checks if not c.ok)
        raise OpsError(f"attestation: report {report['hash']} failed verification ({failed});"
                       " not binding it; ask the attestation service's operator")
    root = ", ".join(f"{r['name']} {r['fingerprint']}" for r in roots) or "none"
    return Outcome(
        f"report {report['hash']} verified ({len(verdict.checks)} checks); MOCK root {root}:"
        " a test-network report, not hardware-validated",
        {"attestation_hash": report["hash"], "attestation_expires_at": report["expires_at"],
         "attestation_report_url": f"{url}/v1/reports/{report['hash']}",
         "attestation_mock_root": root, "attestation_mock": bool(report.get("mock"))},
    )


def check(ctx: Context) -> str | None:
    """The attestation service still knows the journaled report, for this account and network."""
    url = attest.resolve_url(ctx.options.attestation_url)
    report_hash = ctx.facts["attestation_hash"]
    try:
        response = httpx.get(f"{url}/v1/reports/{report_hash}", timeout=ctx.options.rpc_timeout_s)
        if response.status_code == 404:
            return gone(ctx, f"the attestation service {url} does not know report {report_hash}")
        response.raise_for_status()
        report = response.json()["report"]
        account, genesis = report["account"], report["genesis_hash"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        raise OpsError(f"attestation: cannot check the journaled report {report_hash} at {url}"
                       f" ({exc}); nothing was redone; check --attestation-url and run onboard"
                       " again") from None
    if account != ctx.facts["account"] or genesis != ctx.journal.genesis_hash:
        return (f"the attestation service's report {report_hash} is for account {account} on"
                f" genesis {genesis}, not {ctx.facts['account']} on {ctx.journal.genesis_hash}")
    return None
