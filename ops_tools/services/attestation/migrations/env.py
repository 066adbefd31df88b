from ops_tools.services.attestation.store import metadata
from ops_tools.services.common.migrations import run_env

run_env(metadata)
