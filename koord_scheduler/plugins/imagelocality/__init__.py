"""ImageLocality: prefer nodes that already have the pod's container images."""
