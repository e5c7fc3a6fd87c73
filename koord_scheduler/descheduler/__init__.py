"""Descheduling, Koordinator's koord-descheduler hosted in koord-scheduler: the PodMigrationJob controller
(:mod:`.migration`), which moves a pod through a Reservation, and the descheduling strategies that create
those jobs. Runs on the lease holder like the other cluster controllers (``--controllers``)."""
