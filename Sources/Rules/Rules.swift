// Module Rules: the rule-file language and the compiled, pure `Policy`.
//
//   *.rules files ──▶ RuleLexer ──▶ RuleParser ──▶ RuleChecker ──▶ Policy (Sendable value)
//   (include "…")      tokens         statements      directive         │
//                                                     table, bounds,    │ route(for:)
//                          Diagnostic(file:line:col) ◀─ compile         ▼
//                                                                      Route
//   proxy events ──▶ PolicyEvaluator (one request) ──▶ Action / PartDecision ──▶ proxy carries it out
//   begin, partBegin, partData, partSniffed, fieldValue, partEnd, end
//
// Nothing here touches a socket or the clock. The proxy owns all I/O; the evaluator only answers
// "what should happen to this request / this part now", and records what it decided.
