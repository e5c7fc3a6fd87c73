"""CPUBurst: static cfs burst and dynamic cfs quota scaling for LS pods."""
