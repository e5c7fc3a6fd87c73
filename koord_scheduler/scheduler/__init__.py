"""The scheduler core: queue, cache, scheduling and binding cycles, cluster sources."""
