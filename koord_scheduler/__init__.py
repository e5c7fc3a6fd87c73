"""koord-scheduler: a Koordinator-style Kubernetes scheduler."""
