"""The engine image without Docker or a registry: a Dockerfile's steps on a Debian base made
with debootstrap, packed as an image archive that containerd imports."""

DEFAULT_IMAGE = "ghcr.io/k8sdds/engines:0.1"  # the tag pods use (IfNotPresent) and build makes
