"""BEMemoryEvict and the priority-based MemoryEvict: evict pods when node memory use crosses the threshold."""
