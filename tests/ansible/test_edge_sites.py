"""The edge's sites file (roles/edge, docs/edge.md) as the role renders it, with its own tasks
(tasks/sites.yml): OCSP stapling only where the certificate names a responder (or a site asks
for it), the hidden paths on every site, and nginx -t accepting the result. What nginx then does
with TLS and the paths is checked against a running edge by roles/edge/molecule/systemd."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.ansible.conftest import VENV_BIN, deploy_env, run, tail
from tests.hosts import tls

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

PLAYBOOK = Path(__file__).parent / "playbooks" / "render_edge.yml"
OCSP_URL = "http://ocsp.testnet.invalid/"


def _nginx_t(site: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        pytest.skip("nginx is not installed (scripts/bootstrap installs it)")
    conf = workdir / "nginx.conf"
    conf.write_text(
        f"pid {workdir}/nginx.pid;\nerror_log {workdir}/error.log;\n"
        f"events {{}}\nhttp {{\n  access_log off;\n  include {site};\n}}\n"
    )
    return subprocess.run(
        [nginx, "-t", "-p", str(workdir), "-e", str(workdir / "error.log"), "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _site(tmp: Path, name: str, **extra: object) -> dict[str, object]:
    return {"name": name, "server_names": [f"{name}.testnet.invalid"],
            "upstream": "127.0.0.1:9", "tls_certificate": str(tmp / f"net-{name}.pem"),
            "tls_certificate_key": str(tmp / f"net-{name}.key"), **extra}


def _server(text: str, name: str) -> str:
    """The TLS server block of one site."""
    match = re.search(r"listen 443 ssl;\n    server_name " + re.escape(name)
                      + r";\n(.*?)\n}\n", text, re.S)
    assert match, f"no TLS server for {name}"
    return match.group(1)


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("edge")
    tls.make_ca(tmp)
    tls.issue(tmp, "plain", ["plain.testnet.invalid"])
    tls.issue(tmp, "stapled", ["stapled.testnet.invalid"], ocsp_url=OCSP_URL)
    tls.issue(tmp, "refused", ["refused.testnet.invalid"], ocsp_url=OCSP_URL)
    tls.issue(tmp, "gateway", ["gateway.testnet.invalid"])
    edge_sites = [
        _site(tmp, "plain"),
        _site(tmp, "stapled", tls_trusted_certificate=str(tmp / "ca.pem")),
        _site(tmp, "refused", ocsp_stapling=False),
        _site(tmp, "gateway", hidden_paths=["~ ^/v1/workers/?$"]),
    ]
    extra = {"render_out": str(tmp), "edge_sites": edge_sites,
             "edge_ocsp_resolver": ["127.0.0.1", "::1"]}
    proc = run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", str(PLAYBOOK),
                "-e", json.dumps(extra)], env=deploy_env())
    assert proc.returncode == 0, tail(proc)
    return tmp / "candidate" / "sites.conf"


def test_stapling_only_for_a_certificate_naming_a_responder(sites: Path) -> None:
    text = sites.read_text()
    stapled = _server(text, "stapled.testnet.invalid")
    assert f"# {OCSP_URL}" in stapled
    for line in ("ssl_stapling on;", "ssl_stapling_verify on;",
                 f"ssl_trusted_certificate {sites.parent.parent / 'ca.pem'};",
                 "resolver 127.0.0.1 [::1] valid=300s;"):
        assert line in stapled, line
    # The test CA's kind of certificate (no responder), and a site that turned stapling off.
    for name in ("plain.testnet.invalid", "refused.testnet.invalid"):
        assert "ssl_stapling" not in _server(text, name), name


def test_every_site_hides_monitoring_and_api_docs_and_the_gateway_its_worker_list(
        sites: Path) -> None:
    text = sites.read_text()
    hidden = ["/metrics", "/docs", "/redoc", "/openapi.json"]
    for name in ("plain", "stapled", "refused", "gateway"):
        server = _server(text, f"{name}.testnet.invalid")
        found = re.findall(r"location (.+?) \{\n\s+return 404;", server)
        assert found == hidden + (["~ ^/v1/workers/?$"] if name == "gateway" else []), found
        assert 'add_header Strict-Transport-Security "max-age=31536000" always;' in server


def test_the_rendered_sites_pass_nginx_t(sites: Path) -> None:
    proc = _nginx_t(sites, sites.parent)
    assert proc.returncode == 0, proc.stderr
