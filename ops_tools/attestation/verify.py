"""Re-verify a report from its raw bytes; every step is a named check.

Nothing is taken from the report's decoded view: the quote and each GPU's evidence are parsed
again, every signature and certificate link is checked, the binding is recomputed, and only
then is the decoded view compared with what the bytes say. The report's hash covers every other
member and the attestation key signs it, so an edited field fails ``signature`` even when the
forger recomputed the (public) hash. A report is valid when every check holds, and never for a
network the verifier could not see: without the chain's genesis, ``network`` fails as unchecked.
A chain that ends at a mock root holds only when the verifier accepts mock roots
(``Trust.accept_mock``), as mock-attestation tooling does elsewhere.
"""

from __future__ import annotations

import datetime as dt
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from ops_tools.attestation import binding, gpu, tdx
from ops_tools.attestation.canonical import report_hash, signed_message
from ops_tools.attestation.certs import fingerprint, pem_chain, public_key_from_raw
from ops_tools.attestation.encoding import (
    REPORT_VERSION,
    decode_gpu,
    decode_quote,
    parse_iso,
    qe_report_data,
    unb64,
)

CLOCK_SKEW = dt.timedelta(seconds=60)
_HEX32 = re.compile(r"^0x[0-9a-f]{64}$")
_SIG = re.compile(r"^0x[0-9a-f]{128}$")


@dataclass(frozen=True)
class Trust:
    """Trust anchors: the mock roots this verifier knows, and whether it accepts them."""

    mock_roots: tuple[x509.Certificate, ...]
    accept_mock: bool


@dataclass(frozen=True)
class Expected:
    """What the caller expects the report to be for (any field may be left out)."""

    operator_id: str | None = None
    account: str | None = None
    nonce: str | None = None


@dataclass
class Check:
    name: str
    ok: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass
class Verdict:
    checks: list[Check] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append(Check(name, ok, detail))
        return ok

    def failed(self) -> list[str]:
        return [c.name for c in self.checks if not c.ok]

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "checks": [c.to_json() for c in self.checks]}


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "version": int, "operator_id": str, "account": (str, type(None)), "nonce": str,
    "issued_at": str, "expires_at": str, "mock": bool, "genesis_hash": str, "binding": str,
    "measurements": dict, "quote": str, "gpu_evidence": list, "hash": str, "signature": str,
}
UNSIGNED_VERSION = 1


def _shape(report: Any) -> str | None:
    problem = _members(report)
    if problem is None:
        try:
            report_hash(report)
        except ValueError as exc:  # floats, integers beyond 2^53, lone surrogates
            return f"the report has no canonical form: {exc}"
    return problem


def _members(report: Any) -> str | None:
    if not isinstance(report, dict):
        return "the report is not a JSON object"
    if report.get("version") == UNSIGNED_VERSION:
        return (f"version {UNSIGNED_VERSION} is an unsigned report from before reports were"
                " signed: its fields could have been edited, so it proves nothing; request a"
                " new report (wallet-cli attest)")
    for name, kind in _FIELDS.items():
        if name not in report:
            return f"field {name!r} is missing"
        if not isinstance(report[name], kind) or (kind is int and isinstance(report[name], bool)):
            return f"field {name!r} has the wrong type"
    if report["version"] != REPORT_VERSION:
        return f"version {report['version']} is not {REPORT_VERSION}"
    for name in ("nonce", "hash", "genesis_hash"):
        if not _HEX32.fullmatch(report[name]):
            return f"field {name!r} is not 0x and 64 lower-case hex digits"
    if not _SIG.fullmatch(report["signature"]):
        return "field 'signature' is not 0x and 128 lower-case hex digits (r || s)"
    try:
        parse_iso(report["issued_at"])
        parse_iso(report["expires_at"])
    except ValueError:
        return "issued_at/expires_at are not YYYY-MM-DDTHH:MM:SSZ"
    for i, item in enumerate(report["gpu_evidence"]):
        if not (isinstance(item, dict) and isinstance(item.get("index"), int)
                and isinstance(item.get("evidence"), str)
                and isinstance(item.get("certificate"), str)):
            return f"gpu_evidence[{i}] needs index, evidence and certificate"
    return None


def _raw_sig(signature: bytes) -> bytes:
    half = len(signature) // 2
    r = int.from_bytes(signature[:half], "big")
    s = int.from_bytes(signature[half:], "big")
    return encode_dss_signature(r, s)


def _verify_sig(key: Any, signature: bytes, data: bytes, algo: hashes.HashAlgorithm) -> bool:
    if not isinstance(key, ec.EllipticCurvePublicKey):
        return False
    try:
        key.verify(_raw_sig(signature), data, ec.ECDSA(algo))
    except (InvalidSignature, ValueError):
        return False
    return True


@dataclass
class ChainResult:
    ok: bool
    detail: str
    leaf: x509.Certificate | None = None
    root: x509.Certificate | None = None


def verify_chain(pem: bytes, trust: Trust, now: dt.datetime) -> ChainResult:
    """Leaf first, root last; every link signed by the next, the root one of the anchors."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a malformed attribute warns before it fails
            return _verify_chain(pem, trust, now)
    # cryptography parses lazily: a bad field surfaces on first use, as one of several
    # exception types (ValueError, UnsupportedAlgorithm, DuplicateExtension, ...).
    except Exception as exc:
        return ChainResult(False, f"a certificate of the chain is malformed: {exc}")


def _verify_chain(pem: bytes, trust: Trust, now: dt.datetime) -> ChainResult:
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        return ChainResult(False, f"the certificate chain does not parse: {exc}")
    # Re-encoding must give the same bytes: a PEM with a changed byte that still parses is
    # a changed chain, not an equivalent one.
    if pem_chain(certs) != pem:
        return ChainResult(False, "the certificate chain is not in canonical PEM form")
    if len(certs) < 2:
        return ChainResult(False, f"the chain has {len(certs)} certificate(s), at least 2 needed")
    for i, cert in enumerate(certs):
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            return ChainResult(False, f"certificate {i} ({_cn(cert)}) is not valid at {now:%F}")
        if i + 1 < len(certs):
            issuer = certs[i + 1]
            try:
                cert.verify_directly_issued_by(issuer)
            except (InvalidSignature, ValueError, TypeError, UnsupportedAlgorithm) as exc:
                return ChainResult(
                    False, f"certificate {i} ({_cn(cert)}) is not signed by {_cn(issuer)}: {exc}"
                )
            try:
                bc = issuer.extensions.get_extension_for_class(x509.BasicConstraints).value
            except x509.ExtensionNotFound:
                bc = None
            if bc is None or not bc.ca:
                return ChainResult(False, f"{_cn(issuer)} is not a CA certificate")
    root = certs[-1]
    anchors = {a.public_bytes(serialization.Encoding.DER) for a in trust.mock_roots}
    if root.public_bytes(serialization.Encoding.DER) not in anchors:
        return ChainResult(False, f"the chain ends at {_cn(root)} ({fingerprint(root)}),"
                           " which is not a trust anchor of this verifier")
    try:
        root.verify_directly_issued_by(root)
    except (InvalidSignature, ValueError, TypeError, UnsupportedAlgorithm):
        return ChainResult(False, "the root certificate is not self-signed")
    return ChainResult(True, f"{len(certs)} certificates up to {_cn(root)} ({fingerprint(root)})",
                       certs[0], root)


def _cn(cert: x509.Certificate) -> str:
    try:
        names = cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)
    except ValueError:
        return "(unreadable subject)"
    names = cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)
    return str(names[0].value) if names else cert.subject.rfc4514_string()


def verify_report(
    report: Any,
    trust: Trust,
    *,
    now: dt.datetime,
    genesis_hash: str | None,
    expected: Expected | None = None,
) -> Verdict:
    """``genesis_hash`` is the network's current genesis, or None when the chain did not answer:
    then the ``network`` check fails as not checked."""
    verdict = Verdict()
    problem = _shape(report)
    if not verdict.add("format", problem is None, problem or "all fields present, typed"):
        return verdict
    computed = report_hash(report)
    verdict.add("hash", computed == report["hash"],
                f"canonical hash {computed}" + ("" if computed == report["hash"]
                                                 else f" differs from {report['hash']}"))
    _check_time(verdict, report, now)
    if genesis_hash is None:
        verdict.add("network", False,
                    f"not checked: the chain did not answer, so genesis {report['genesis_hash']}"
                    " could not be compared with the network's; retry when it answers")
    else:
        same = report["genesis_hash"] == genesis_hash
        verdict.add("network", same,
                    f"issued on genesis {report['genesis_hash']}" + (
                        "" if same else f", this network is {genesis_hash} (an earlier network)"))
    if expected is not None:
        _check_expected(verdict, report, expected)
    nonce = bytes.fromhex(report["nonce"][2:])
    roots: list[x509.Certificate] = []
    _check_quote(verdict, report, trust, now, nonce, roots)
    _check_gpus(verdict, report, trust, now, nonce, roots)
    mock_roots = [r for r in roots if r in trust.mock_roots]
    if mock_roots:
        verdict.add(
            "mock_root_accepted",
            trust.accept_mock,
            f"the evidence chains end at the MOCK root {fingerprint(mock_roots[0])}; "
            + ("this verifier accepts mock roots" if trust.accept_mock else
               "this verifier does not accept mock roots (set accept_mock_root to accept them)"),
        )
    return verdict


def _check_time(verdict: Verdict, report: dict[str, Any], now: dt.datetime) -> None:
    issued, expires = parse_iso(report["issued_at"]), parse_iso(report["expires_at"])
    if issued - CLOCK_SKEW > now:
        verdict.add("expiry", False, f"issued_at {report['issued_at']} is in the future")
    elif now >= expires:
        verdict.add("expiry", False, f"expired at {report['expires_at']}")
    elif expires <= issued:
        verdict.add("expiry", False, "expires_at is not after issued_at")
    else:
        verdict.add("expiry", True, f"valid until {report['expires_at']}")


def _check_expected(verdict: Verdict, report: dict[str, Any], expected: Expected) -> None:
    for name in ("operator_id", "account", "nonce"):
        want = getattr(expected, name)
        if want is not None:
            got = report[name]
            verdict.add(f"expected.{name}", got == want,
                        f"report is for {name} {got!r}" + ("" if got == want
                                                           else f", expected {want!r}"))


def _check_quote(verdict: Verdict, report: dict[str, Any], trust: Trust, now: dt.datetime,
                 nonce: bytes, roots: list[x509.Certificate]) -> None:
    try:
        raw = unb64(report["quote"])
        quote = tdx.parse_quote(raw)
    except (ValueError, tdx.QuoteFormatError) as exc:
        verdict.add("tdx.structure", False, f"not a TDX v4 quote: {exc}")
        verdict.add("signature", False, "no attestation key to check the report's signature"
                    " with: the quote does not parse")
        return
    verdict.add("tdx.structure", True, f"TDX quote v4, {len(raw)} bytes, TEE type 0x81")
    sig = quote.signature_data
    chain = verify_chain(sig.pck_chain_pem, trust, now)
    verdict.add("tdx.pck_chain", chain.ok, chain.detail)
    if chain.root is not None:
        roots.append(chain.root)
    qe_ok = chain.leaf is not None and _verify_sig(
        chain.leaf.public_key(), sig.qe_report_signature, sig.qe_report, hashes.SHA256()
    )
    verdict.add("tdx.qe_report_signature", qe_ok,
                "QE report signed by the PCK key" if qe_ok else
                "the QE report signature does not verify with the PCK certificate's key")
    qe = tdx.decode_qe_report(sig.qe_report)
    ak_ok = qe["report_data"] == qe_report_data(sig.attestation_key, sig.qe_auth_data)
    verdict.add("tdx.attestation_key", ak_ok,
                "QE report data = SHA-256(attestation key || QE auth data)" if ak_ok else
                "the QE report does not certify this attestation key")
    try:
        ak = public_key_from_raw(sig.attestation_key)
    except ValueError:
        ak = None
    quote_ok = ak is not None and _verify_sig(ak, sig.signature, quote.signed_bytes(),
                                              hashes.SHA256())
    verdict.add("tdx.quote_signature", quote_ok,
                "header and TD report body signed by the attestation key" if quote_ok else
                "the quote signature does not verify with the attestation key")
    # Over the hash the report states: ``hash`` already says whether the members match it, so
    # an edit without a new hash fails ``hash`` alone, and one with a new hash fails here.
    signed_ok = ak is not None and _verify_sig(ak, bytes.fromhex(report["signature"][2:]),
                                               signed_message(report["hash"]), hashes.SHA256())
    verdict.add("signature", signed_ok,
                "the report's hash (covering every member) is signed by the quote's attestation"
                " key" if signed_ok else "the report's hash is not signed by the quote's"
                " attestation key: a member was edited and the hash recomputed, or the"
                " signature is not this service's")
    debug = quote.body.values["td_attributes"][0] & 1
    verdict.add("tdx.td_attributes", not debug,
                "TD is not debuggable" if not debug else "td_attributes has DEBUG set")
    want = binding.report_data(report["operator_id"], report["account"], nonce)
    bound = quote.body.values["report_data"] == want
    verdict.add("binding.report_data", bound,
                f"report_data = {binding.BINDING_SCHEME} for subject"
                f" {binding.subject(report['operator_id'], report['account'])!r}" if bound else
                "report_data does not match the binding of this report's subject and nonce")
    same = report["measurements"].get("tdx") == decode_quote(raw)
    verdict.add("tdx.measurements", same,
                "decoded header and TD report body match the quote bytes" if same else
                "the decoded measurements differ from what the quote bytes say")


def _check_gpus(verdict: Verdict, report: dict[str, Any], trust: Trust, now: dt.datetime,
                nonce: bytes, roots: list[x509.Certificate]) -> None:
    items = report["gpu_evidence"]
    indices = [item["index"] for item in items]
    decoded = report["measurements"].get("gpus")
    shape_ok = (bool(items) and indices == list(range(len(items)))
                and isinstance(decoded, list) and len(decoded) == len(items))
    verdict.add("gpu.count", shape_ok,
                f"{len(items)} GPU(s) with evidence" if shape_ok else
                "GPU evidence must be present, indexed 0..n-1, one decoded entry each")
    if not shape_ok:
        return
    for item, view in zip(items, decoded, strict=True):
        name = f"gpu[{item['index']}]"
        try:
            raw = unb64(item["evidence"])
            pem = unb64(item["certificate"])
            exchange = gpu.parse_report(raw)
        except (ValueError, gpu.EvidenceFormatError) as exc:
            verdict.add(f"{name}.structure", False, f"not an SPDM measurement exchange: {exc}")
            continue
        verdict.add(f"{name}.structure", True,
                    f"SPDM GET_MEASUREMENTS/MEASUREMENTS, {len(exchange.measurements)} blocks")
        chain = verify_chain(pem, trust, now)
        verdict.add(f"{name}.cert_chain", chain.ok, chain.detail)
        if chain.root is not None:
            roots.append(chain.root)
        sig_ok = chain.leaf is not None and _verify_sig(
            chain.leaf.public_key(), exchange.signature, exchange.signed_bytes, hashes.SHA384()
        )
        verdict.add(f"{name}.signature", sig_ok,
                    "measurements signed by the device key (ECDSA P-384)" if sig_ok else
                    "the SPDM signature does not verify with the device certificate's key")
        nonce_ok = exchange.request_nonce == nonce and exchange.response_nonce == nonce
        verdict.add(f"{name}.nonce", nonce_ok,
                    "request and response carry the report's nonce" if nonce_ok else
                    "the SPDM nonce differs from the report's nonce")
        recomputed = decode_gpu(item["index"], raw, nonce, chain_ok=chain.ok, signature_ok=sig_ok)
        golden = recomputed["claims"]["measres"] == "comparison-successful"
        verdict.add(f"{name}.measurements", golden,
                    "all measurement blocks equal the reference values" if golden else
                    "a measurement block differs from its reference value")
        same = view == recomputed
        verdict.add(f"{name}.claims", same,
                    "decoded claims match the evidence bytes" if same else
                    "the decoded claims differ from what the evidence says")
