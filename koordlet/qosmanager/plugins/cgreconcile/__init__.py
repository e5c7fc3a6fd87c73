"""CgroupReconcile: memory QoS (memory.min/low/high) per QoS class."""
