"""InterPodAffinity: required and preferred pod (anti-)affinity, with existing pods' terms (symmetry)."""
