"""Running the playbooks (ansible-playbook with the collection's events callback) and reading
inventories and host manifests."""
