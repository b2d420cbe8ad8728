// Module HTTP1.
