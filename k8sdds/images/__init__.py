"""The engine image without Docker or a registry: a Dockerfile's steps on a Debian base made
with debootstrap, packed as an image archive that containerd imports."""
