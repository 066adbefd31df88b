from ops_tools.services.common.migrations import run_env
from ops_tools.services.faucet.store import metadata

run_env(metadata)
