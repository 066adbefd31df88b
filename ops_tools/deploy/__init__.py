"""Running the playbooks (ansible-runner) and reading inventories and host manifests."""
