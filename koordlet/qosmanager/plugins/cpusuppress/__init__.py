"""CPUSuppress (gate BECPUSuppress): keep BE pods to what LS pods leave, by cfs quota or cpuset."""
