"""Runtime hooks: the values the reconcilers keep on cgroups, delivered when the runtime creates a pod or a
container (NRI)."""
