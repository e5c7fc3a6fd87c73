"""BECPUEvict (BE CPU satisfaction) and the priority-based CPUEvict (node CPU usage)."""
