"""The runtime metadata decode every chain connection pays (a service's start, a wallet-cli call,
an ops-tools run): the development runtime's metadata decoded and its portable registry loaded,
by ``ops_tools.chain.scale.ScaleConfig`` and by scalecodec's own configuration; processor time
per connection, the median of several rounds in this process.

python benchmarks/metadata_decode.py [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time

from scalecodec.base import RuntimeConfigurationObject, ScaleBytes
from scalecodec.type_registry import load_type_registry_preset

from ops_tools.chain.scale import ScaleConfig
from ops_tools.devnode.runtime.metadata import encode_metadata

CONSTANTS = {"slot_duration": 1000, "min_stake": 10**12, "epoch_length": 10,
             "max_heartbeat_epoch_advance": 2}


def _connection(config: RuntimeConfigurationObject, metadata: bytes) -> float:
    """Processor time of what substrate-interface's init_runtime does with the metadata."""
    start = time.process_time()
    config.update_type_registry(load_type_registry_preset("core"))
    decoded = config.create_scale_object("MetadataVersioned", data=ScaleBytes(metadata))
    decoded.decode()
    config.add_portable_registry(decoded)
    return time.process_time() - start


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    metadata = encode_metadata(CONSTANTS)
    print(f"metadata: {len(metadata)} bytes (V14), {rounds} rounds")
    for name, make in (("scalecodec's RuntimeConfigurationObject", RuntimeConfigurationObject),
                       ("ops_tools ScaleConfig", ScaleConfig)):
        times = [_connection(make(), metadata) for _ in range(rounds)]
        print(f"{name:42s} median {statistics.median(times) * 1000:6.1f} ms CPU"
              f" (min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f})")


if __name__ == "__main__":
    main()
