// Module Reactor.
