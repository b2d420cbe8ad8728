// Module Inspect.
