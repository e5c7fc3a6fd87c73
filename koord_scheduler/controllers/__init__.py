"""The cluster controllers koord-scheduler hosts (leader only, ``--controllers``)."""
