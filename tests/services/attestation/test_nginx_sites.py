"""The attestation and explorer roles' nginx sites (the testnet: TLS), rendered from the roles'
templates with their defaults and the testnet's values, load together in nginx -t."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

from tests.conftest import ROOT

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

ROLES = ("attestation", "explorer")


def render(role: str, out: Path, cert: Path, key: Path, **extra: object) -> Path:
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
    values = {k: v for k, v in defaults.items() if "{{" not in str(v)}
    values.update({
        f"{role}_public_hostname": f"{role}.testnet.invalid",
        f"{role}_proxy_tls_certificate": str(cert), f"{role}_proxy_tls_certificate_key": str(key),
        f"{role}_proxy_http_port": 18080, f"{role}_proxy_https_port": 18443, **extra,
    })
    env = jinja2.Environment(  # noqa: S701 - nginx configuration, not HTML
        loader=jinja2.FileSystemLoader(ROOT / "roles" / role / "templates"),
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    site = out / f"net-{role}.conf"
    site.write_text(env.get_template("etc/nginx/sites-available/net-service.conf.j2")
                    .render(**values))
    return site


def nginx_t(sites: list[Path], workdir: Path) -> subprocess.CompletedProcess[str]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        pytest.fail("nginx is not installed; run scripts/bootstrap")
    conf = workdir / "nginx.conf"
    includes = "".join(f"  include {s};\n" for s in sites)
    conf.write_text(f"pid {workdir}/nginx.pid;\nerror_log {workdir}/error.log;\n"
                    f"events {{}}\nhttp {{\n  access_log off;\n{includes}}}\n")
    return subprocess.run([nginx, "-t", "-p", str(workdir), "-e", str(workdir / "error.log"),
                           "-c", str(conf)], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "site.pem", tmp_path / "site.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                    "-subj", "/CN=attestation.testnet.invalid", "-keyout", str(key),
                    "-out", str(cert)], capture_output=True, check=True, timeout=60)
    return cert, key


def test_both_tls_sites_load_together(tmp_path, certificate):
    sites = [render(role, tmp_path, *certificate) for role in ROLES]
    for role, site in zip(ROLES, sites, strict=True):
        text = site.read_text()
        assert "listen 18443 ssl;" in text and "return 301 https://$host$request_uri;" in text
        assert f"server_name {role}.testnet.invalid;" in text
        assert "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;" in text
    proc = nginx_t(sites, tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_a_missing_certificate_fails_nginx_t(tmp_path):
    site = render("attestation", tmp_path, tmp_path / "none.pem", tmp_path / "none.key")
    proc = nginx_t([site], tmp_path)
    assert proc.returncode != 0 and "none.pem" in proc.stderr
