// Module Multipart.
