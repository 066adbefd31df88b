from ops_tools.services.common.migrations import run_env

from ops_tools.services.attestation.storage import metadata

run_env(metadata)
