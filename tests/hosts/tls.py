"""A throwaway certificate authority for the edge's tests (roles/edge, docs/edge.md): a CA and,
per site, the files the testnet inventory's edge takes from `net_tls_src_dir`, net-<site>.pem
(covering every name of the site) and net-<site>.key. P-256, valid two days; every key 0600.
A site written SITE@rsa gets an RSA key instead (usable for RSA key exchange, so that a test can
show the edge refusing the suites without forward secrecy, which an ECDSA key cannot offer).
Clients then trust ca.pem alone (tests/hosts/edge_client.py).

Used by roles/edge/molecule/systemd (prepare.yml) and tests/hosts/test_testnet_shape.py.
Usage (from the repository root): python -m tests.hosts.tls DIR SITE[@rsa]=NAME[,NAME...] ..."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DAYS = "2"
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
_RSA = ["-newkey", "rsa:2048", "-nodes"]


def _openssl(directory: Path, *args: str) -> None:
    # The keys are created 0600 whatever the caller's umask.
    proc = subprocess.run(["openssl", *args], cwd=directory, capture_output=True, text=True,
                          check=False, preexec_fn=lambda: os.umask(0o077))
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {proc.stderr.strip()}")


def make_ca(directory: Path, days: str = DAYS) -> Path:
    """ca.pem and its key in ``directory`` (0700); returns the certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    _openssl(directory, "req", "-x509", *_EC, "-days", days, "-subj", "/CN=NET edge test CA",
             "-keyout", "ca.key", "-out", "ca.pem",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign")
    return directory / "ca.pem"


def issue(directory: Path, site: str, names: list[str], rsa: bool = False,
          ocsp_url: str | None = None, days: str = DAYS) -> tuple[Path, Path]:
    """net-<site>.pem for ``names`` (the first is the subject), signed by the CA of
    ``directory``, and net-<site>.key (RSA with ``rsa``, else P-256); ``ocsp_url`` names an
    OCSP responder in the certificate, as a public CA's do."""
    ext = directory / f"net-{site}.ext"
    usage = "digitalSignature, keyEncipherment" if rsa else "digitalSignature"
    ext.write_text(
        "basicConstraints = critical, CA:FALSE\n"
        f"keyUsage = critical, {usage}\n"
        "extendedKeyUsage = serverAuth\n"
        f"subjectAltName = {', '.join(f'DNS:{n}' for n in names)}\n"
        + (f"authorityInfoAccess = OCSP;URI:{ocsp_url}\n" if ocsp_url else "")
    )
    _openssl(directory, "req", "-new", *(_RSA if rsa else _EC), "-subj", f"/CN={names[0]}",
             "-keyout", f"net-{site}.key", "-out", f"net-{site}.csr")
    _openssl(directory, "x509", "-req", "-in", f"net-{site}.csr", "-CA", "ca.pem",
             "-CAkey", "ca.key", "-CAcreateserial", "-days", days, "-extfile", ext.name,
             "-out", f"net-{site}.pem")
    return directory / f"net-{site}.pem", directory / f"net-{site}.key"


def make(directory: Path, sites: dict[str, list[str]], days: str = DAYS) -> Path:
    """The CA and one certificate per site (a site named SITE@rsa: an RSA key), valid ``days``;
    returns the CA's certificate."""
    ca = make_ca(directory, days)
    for site, names in sites.items():
        name, _, kind = site.partition("@")
        issue(directory, name, names, rsa=kind == "rsa", days=days)
    return ca


if __name__ == "__main__":
    make(Path(sys.argv[1]), {site: names.split(",") for site, names in
                             (arg.split("=", 1) for arg in sys.argv[2:])})
