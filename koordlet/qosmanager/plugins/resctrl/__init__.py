"""RdtResctrl and Resctrl: resctrl groups per QoS class and per annotated pod."""
