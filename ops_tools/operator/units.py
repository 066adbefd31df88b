"""What the service manager runs: the worker's configuration, its systemd unit or supervisor
program. Pure text from the options; writing and starting them is ``steps.daemon``."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import yaml

from ops_tools.operator.context import ROOT, Options

# The worker notifies the watchdog every liveness tick (tick_s, 2 s) whether the tick succeeded
# or not: a hung loop is restarted, a gateway outage is not. A tick may wait for an extrinsic's
# inclusion, hence the margin.
WATCHDOG_SEC = 120
# The worker's drain on SIGTERM (its requests in flight finish), and the service manager's stop
# timeout around it: the drain, uvicorn's graceful shutdown after it (10 s) and a margin, so
# systemd or supervisord never kills a draining worker (docs/containers.md, the chain of stop
# bounds; a container's is containers.run.default_stop_timeout).
AFTER_DRAIN_S = 45
DRAIN_TIMEOUT_MAX_S = 3600  # the worker's own bound (worker/config.py)


def stop_timeout_s(opts: Options) -> int:
    return opts.drain_timeout_s + AFTER_DRAIN_S


def worker_config(opts: Options, genesis_hash: str, passphrase_file: Path) -> str:
    config: dict[str, Any] = {
        "listen_host": opts.worker_host,
        "listen_port": opts.worker_port,
        "public_url": opts.worker_url(),
        "gateway_url": opts.gateway_url.rstrip("/"),
        "engine_url": opts.engine_url,
        "models": list(opts.models),
        "rpc_url": opts.rpc_url,
        "keystore_dir": str(opts.keystore_dir),
        "account": opts.name,
        "passphrase_file": str(passphrase_file),
        "genesis_hash": genesis_hash,
        "state_dir": str(opts.state_dir),
        "drain_timeout_s": opts.drain_timeout_s,
        "log_level": "info",
    }
    if opts.engine_kind is not None:
        config["engine_kind"] = opts.engine_kind
    if opts.model_path is not None:  # the worker counts streamed usage with its tokenizer
        config["engine_model_path"] = str(opts.model_path)
    return "# Written by ops-tools operator onboard (docs/operator.md).\n" + yaml.safe_dump(
        config, sort_keys=True)


def engine_config(opts: Options) -> str:
    """net-local-engine's settings for --model-path: llama.cpp's server on loopback."""
    assert opts.model_path is not None
    config = {"kind": "llamacpp", "listen_host": "127.0.0.1", "listen_port": opts.engine_port,
              "model_path": str(opts.model_path), "threads": os.cpu_count() or 2,
              "state_dir": str(opts.state_dir)}
    if opts.models:
        config["model_alias"] = opts.models[0]
    return "# Written by ops-tools operator onboard (docs/operator.md).\n" + yaml.safe_dump(
        config, sort_keys=True)


def _command(opts: Options) -> str:
    return f"{shlex.quote(str(opts.worker_executable))} --config" \
           f" {shlex.quote(str(opts.state_dir / 'worker.yml'))}"


def _engine_command(opts: Options) -> str:
    engine = opts.worker_executable.with_name("net-local-engine")
    return f"{shlex.quote(str(engine))} --config {shlex.quote(str(opts.state_dir / 'engine.yml'))}"


def _user_lines(opts: Options) -> str:
    user = opts.run_as
    if user in (None, ROOT):
        return ""
    owner = shlex.quote(f"{user}:{user}")
    dirs = [opts.state_dir]
    if not opts.keystore_dir.is_relative_to(opts.state_dir):
        dirs.append(opts.keystore_dir)
    # The onboarding (root) writes the worker's configuration, secrets and keystore 0600; they
    # go to the worker's user before each start ("+": this command alone runs as root).
    return (f"User={user}\nGroup={user}\n"
            f"ExecStartPre=+/bin/chown -R {owner} {shlex.join(map(str, dirs))}\n")


def systemd_unit(opts: Options) -> str:
    user = _user_lines(opts)
    return f"""# Written by ops-tools operator onboard (docs/operator.md); a re-run overwrites it.
[Unit]
Description=NET operator worker {opts.name}
After=network-online.target
Wants=network-online.target
StartLimitIntervalSec=600
StartLimitBurst=10

[Service]
Type=notify
NotifyAccess=main
{user}ExecStart={_command(opts)}
Restart=always
RestartSec=5
WatchdogSec={WATCHDOG_SEC}
TimeoutStartSec=120
TimeoutStopSec={stop_timeout_s(opts)}
KillSignal=SIGTERM
SuccessExitStatus=SIGTERM

NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=true
# The worker forwards HTTP to the engine; the engine, not the worker, holds the GPU.
PrivateDevices=true
ProtectKernelTunables=true
ProtectKernelModules=true
ProtectKernelLogs=true
ProtectControlGroups=true
ProtectClock=true
ProtectHostname=true
RestrictSUIDSGID=true
RestrictRealtime=true
RestrictNamespaces=true
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
LockPersonality=true
MemoryDenyWriteExecute=true
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallFilter=~@privileged @resources
CapabilityBoundingSet=
UMask=0077
ReadWritePaths={opts.state_dir}

[Install]
WantedBy=multi-user.target
"""


def supervisor_program(opts: Options) -> str:
    return _supervisor_program(opts, opts.program, _command(opts), "worker.log",
                               stop_wait_s=stop_timeout_s(opts))


def _supervisor_program(opts: Options, program: str, command: str, log: str,
                        stop_wait_s: int = 20) -> str:
    user = f"user={opts.run_as}\n" if opts.run_as else ""
    return f"""; Written by ops-tools operator onboard (docs/operator.md); a re-run overwrites it.
[program:{program}]
command={command}
directory={opts.state_dir}
{user}autostart=true
autorestart=true
startsecs=2
startretries=5
stopsignal=TERM
stopwaitsecs={stop_wait_s}
stopasgroup=true
killasgroup=true
redirect_stderr=true
stdout_logfile={opts.state_dir / log}
stdout_logfile_maxbytes=10MB
stdout_logfile_backups=3
"""


def engine_systemd_unit(opts: Options) -> str:
    """llama.cpp's server for --model-path: loopback only, no authentication of its own (only
    the worker beside it calls it); it reads the model file, writes nothing."""
    user = _user_lines(opts)
    return f"""# Written by ops-tools operator onboard (docs/operator.md); a re-run overwrites it.
[Unit]
Description=NET operator engine {opts.name} (llama.cpp, {opts.model_path})
After=network-online.target
Before={opts.program}.service

[Service]
Type=simple
{user}ExecStart={_engine_command(opts)}
Restart=always
RestartSec=5
TimeoutStopSec=20
NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=true
ProtectKernelTunables=true
ProtectKernelModules=true
ProtectControlGroups=true
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
RestrictSUIDSGID=true
LockPersonality=true
UMask=0077

[Install]
WantedBy=multi-user.target
"""


def engine_supervisor_program(opts: Options) -> str:
    return _supervisor_program(opts, opts.engine_program, _engine_command(opts), "engine.log")
