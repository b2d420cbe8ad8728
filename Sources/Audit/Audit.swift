// Module Audit.
