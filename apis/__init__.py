"""Wire types shared by koord-scheduler and koordlet.

Kubernetes core views, Koordinator CRDs, configuration.
"""
