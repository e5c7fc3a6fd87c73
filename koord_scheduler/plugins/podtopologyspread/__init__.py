"""PodTopologySpread: hard and soft topology spread constraints, minDomains, inclusion policies and defaults."""
