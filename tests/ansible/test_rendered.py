"""The service and proxy templates, rendered with the roles' own variables, load in the tools
that run them: systemd-analyze verify (offline) for the unit, nginx -t for the proxy site."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.ansible.conftest import VENV_BIN, run, tail
from tests.conftest import free_port

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

PLAYBOOK = Path(__file__).parent / "playbooks" / "render_templates.yml"


def _render(out: Path, *, tls: bool, cert: Path, key: Path) -> None:
    binary = out / "net-node"
    shutil.copy(VENV_BIN / "devnode", binary)
    proc = run(
        [
            str(VENV_BIN / "ansible-playbook"),
            "-i",
            "localhost,",
            str(PLAYBOOK),
            "-e",
            f"render_out={out} render_binary={binary} render_tls={tls}",
            "-e",
            f"render_cert={cert} render_key={key}",
            "-e",
            f"render_http_port={free_port()} render_https_port={free_port()}",
        ]
    )
    assert proc.returncode == 0, tail(proc)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    _render(out, tls=False, cert=out / "none.pem", key=out / "none.key")
    return out


def test_systemd_unit_is_hardened_and_verifies_offline(rendered: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    unit = rendered / "net-node.service"
    # ExecStart continues over lines; join them to read the command line.
    text = unit.read_text().replace(" \\\n    ", " ")
    for line in [
        "NoNewPrivileges=true",
        "ProtectSystem=strict",
        "PrivateTmp=true",
        f"ReadWritePaths={rendered}/var/lib/net/authority-0/data",
        "Restart=on-failure",
        "RestartSec=5",
        "LimitNOFILE=65536",
        "--validator",
        "--listen-addr /ip4/0.0.0.0/tcp/30333",
    ]:
        assert line in text, f"{line!r} missing from the unit:\n{text}"
    proc = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    # Warnings about the unit itself would name its file; other units' noise is not ours.
    ours = [ln for ln in (proc.stdout + proc.stderr).splitlines() if unit.name in ln]
    assert proc.returncode == 0 and not ours, proc.stdout + proc.stderr


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


def test_nginx_site_without_tls_passes_nginx_t(rendered: Path) -> None:
    site = rendered / "net-rpc.conf"
    text = site.read_text()
    assert "server_name rpc.testnet.invalid rpc-alias.testnet.invalid;" in text
    assert "limit_req zone=net_rpc_req" in text and "limit_conn net_rpc_conn" in text
    proc = _nginx_t(site, rendered)
    assert proc.returncode == 0, proc.stderr


def test_nginx_site_with_tls_passes_nginx_t(tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "rpc.pem", tmp_path / "rpc.key"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=rpc.testnet.invalid",
         "-keyout", str(key), "-out", str(cert)],
        capture_output=True, check=True, timeout=60,
    )
    _render(tmp_path, tls=True, cert=cert, key=key)
    site = tmp_path / "net-rpc.conf"
    assert " ssl;" in site.read_text()
    proc = _nginx_t(site, tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_nginx_t_rejects_a_broken_site(rendered: Path, tmp_path: Path) -> None:
    """The check above can fail: a site with a broken directive does not pass nginx -t."""
    site = tmp_path / "broken.conf"
    text = (rendered / "net-rpc.conf").read_text()
    site.write_text(text.replace("limit_req_status 429;", "limit_req_status;"))
    assert _nginx_t(site, tmp_path).returncode != 0
