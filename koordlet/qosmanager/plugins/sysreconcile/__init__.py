"""SystemConfig: node sysctls from NodeSLO systemStrategy (Koordinator qosmanager/plugins/sysreconcile)."""
