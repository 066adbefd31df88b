from ops_tools.services.common.migrations import run_env
from tests.services.common.sample.app import metadata

run_env(metadata)
