// Module Proxy.
