#!/bin/sh
# The worker's share of every image variant, run once at build time (containers/worker/
# Dockerfile): its unprivileged user, its own virtualenv and the directories it reads.
#   install.sh <python> <pip install arguments: where the packages come from, what to install>
set -eu
python=$1
shift
# A fixed uid: operators chown the mounted configuration and secrets to it (docs/containers.md).
if ! getent passwd net-worker >/dev/null; then
  groupadd --system --gid 10001 net-worker
  useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin net-worker
fi
"$python" -m venv /opt/net-worker/venv
/opt/net-worker/venv/bin/pip install --no-cache-dir --disable-pip-version-check "$@"
# The root file system is read-only at run time: the byte code is compiled now (it is not
# written later); the mount points exist for the configuration and the secrets.
/opt/net-worker/venv/bin/python -m compileall -q /opt/net-worker/venv >/dev/null || true
install -d -m 0755 /etc/net-worker /run/secrets
