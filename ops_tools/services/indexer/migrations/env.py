from ops_tools.services.common.migrations import run_env
from ops_tools.services.indexer.tables import Base

run_env(Base.metadata)
