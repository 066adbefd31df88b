"""Where a worker listens unless its settings say otherwise: in a module of its own so that the
container's health check (``net-worker-container --health``, every 15 s beside the engine) reads
it without importing the settings model."""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8101
