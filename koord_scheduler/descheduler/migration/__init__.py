"""The PodMigrationJob controller (Koordinator ``pkg/descheduler/controllers/migration``): the pure step
(:mod:`.decide`), the Reservation built from the pod (:mod:`.reservation_template`), the API calls
(:mod:`.api`) and the controller loop (:mod:`.controller`)."""
