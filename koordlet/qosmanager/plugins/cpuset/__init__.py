"""CPUSetAllocator: containers on their bound cpuset or the shared pool."""
