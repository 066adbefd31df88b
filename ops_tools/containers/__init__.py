"""The worker's container images (containers/worker/Dockerfile) and the container that runs one:
the debootstrap base imported into Docker, the builds, the run specification. Driven by the
docker SDK; imports no other room (the operator and the worker role use it)."""
