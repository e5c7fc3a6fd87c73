"""The scheduling framework: statuses, cycle state, extension-point protocols, snapshot, registry, runtime."""
