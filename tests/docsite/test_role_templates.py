"""The docs role's nginx site for systemd hosts (the testnet: TLS like the other public
endpoints), rendered from the role's template, loads in nginx -t."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

from tests.docsite.conftest import ROLE_TEMPLATES

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def _render(out: Path, *, tls: bool, cert: Path, key: Path) -> Path:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROLE_TEMPLATES), autoescape=False,  # noqa: S701
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
    )
    site = out / "net-docs.conf"
    # The role's defaults (the TLS policy, HSTS, stapling), then what a host sets.
    defaults = yaml.safe_load((ROLE_TEMPLATES.parent / "defaults" / "main.yml").read_text())
    host = dict(
        docs_public_hostname="docs.testnet.invalid", docs_tls=tls, docs_tls_certificate=str(cert),
        docs_tls_certificate_key=str(key), docs_http_port=18081, docs_https_port=18443,
        docs_site_dir=str(out / "site"),
    )
    site.write_text(env.get_template("etc/nginx/sites-available/net-docs.conf.j2").render(
        {**defaults, **host}))
    return site


def _nginx_t(site: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        pytest.skip("nginx is not installed (scripts/bootstrap installs it)")
    conf = workdir / "nginx.conf"
    conf.write_text(
        f"pid {workdir}/nginx.pid;\nerror_log {workdir}/error.log;\n"
        f"events {{}}\nhttp {{\n  access_log off;\n  include /etc/nginx/mime.types;\n"
        f"  include {site};\n}}\n"
    )
    return subprocess.run(
        [nginx, "-t", "-p", str(workdir), "-e", str(workdir / "error.log"), "-c", str(conf)],
        capture_output=True, text=True, timeout=60, check=False,
    )


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "docs.pem", tmp_path / "docs.key"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=docs.testnet.invalid",
         "-keyout", str(key), "-out", str(cert)],
        capture_output=True, check=True, timeout=60,
    )
    return cert, key


def test_tls_site_passes_nginx_t(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    site = _render(tmp_path, tls=True, cert=certificate[0], key=certificate[1])
    text = site.read_text()
    assert "listen 18443 ssl;" in text and "return 301 https://$host$request_uri;" in text
    assert "server_name docs.testnet.invalid;" in text
    assert f"root {tmp_path / 'site'};" in text
    proc = _nginx_t(site, tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_a_missing_certificate_does_not_pass(tmp_path: Path) -> None:
    """The check above can fail: a certificate that is not there fails nginx -t."""
    site = _render(tmp_path, tls=True, cert=tmp_path / "none.pem", key=tmp_path / "none.key")
    proc = _nginx_t(site, tmp_path)
    assert proc.returncode != 0 and "none.pem" in proc.stderr
