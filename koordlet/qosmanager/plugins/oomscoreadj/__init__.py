"""OOMScoreAdj: containers' oom_score_adj from the pod's annotations."""
