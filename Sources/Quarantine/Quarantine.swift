// Module Quarantine.
