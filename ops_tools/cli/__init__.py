"""The ``ops-tools`` command: parses arguments and calls the concern packages, nothing more."""
