// Module Rules.
