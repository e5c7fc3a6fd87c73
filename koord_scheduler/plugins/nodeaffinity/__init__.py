"""NodeAffinity: pod nodeSelector, required and preferred node affinity, and scheduler-added affinity."""
