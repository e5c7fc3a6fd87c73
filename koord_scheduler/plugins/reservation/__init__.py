"""The Reservation plugin: schedules Reservations as reserve pods and lets owner pods use what they hold."""
