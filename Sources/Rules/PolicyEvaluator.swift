import Multipart

/// Decides, for ONE request, what happens to it and to each of its parts, as the proxy streams it.
///
/// ```
///            begin ──▶ .reject(v)                                  (405 / 415 / 413 before any body byte)
///              │
///              ▼ .proceed(kind)
///  ┌──▶ receiving ── bodyData ── anomalies ── malformed ──▶ (reject ends everything)
///  │        │
///  │    partBegin ──▶ inPart ── partData* ── partSniffed? ── fieldValue? ──┐
///  │                                                                        │
///  └──────────────────────────────── partEnd ◀──────────────────────────────┘
///              receiving ── end() ──▶ finished                    (422 for missing required parts)
/// ```
/// Every method returns an `Action` the proxy carries out; none does I/O. Once a request is
/// rejected every later call returns the same rejection. In monitor mode every call returns
/// `forward` (and `.proceed`) and `findings` records what enforce mode would have done.
///
/// The evaluator is total: a call out of order (`partData` outside a part, `end` inside one, anything
/// after `end`) is a proxy bug, but one that a client's bytes or their arrival order might steer the
/// proxy into, so it never traps. It answers `.reject` with a 500 `internal_error` violation, in monitor
/// mode too, and every later call repeats it: that one request fails, the process lives on.
public struct PolicyEvaluator {
    enum State {
        /// Before `begin`. Legal: `begin`.
        case idle
        /// Between parts. Legal: `partBegin`, `bodyData`, `anomalies`, `malformed`, `end`.
        case receiving(Body)
        /// Inside a part. Legal: `partData`, `partSniffed`, `fieldValue`, `partEnd`, `bodyData`,
        /// `anomalies`, `malformed`.
        case inPart(Body, Part)
        /// Rejected in enforce mode; every call answers with the rejection.
        case rejected(Violation)
        /// After `end`. No call is legal (each answers `internal_error`).
        case finished
    }

    // The body and the part are objects: the state holds one reference to each, so moving them through the
    // state and binding them out of it (every call inside a part) costs a retain, not a copy of every string and
    // collection in them (with a retain and a release of each: as structs, about 400 a request under a typical
    // policy). The evaluator keeps value semantics: every change goes through `own`, which copies an object
    // another copy of the evaluator still shares (a caller may copy an evaluator mid-request to probe it).
    /// The body or the part: an object `own` copies for an evaluator that shares it with a copy of itself.
    protocol StateObject: AnyObject {
        func copy() -> Self
    }

    final class Body: StateObject {
        var bodyBytes: UInt64 = 0
        var bodyExceeded = false
        var parts = 0
        var files = 0
        var fields = 0
        /// Parts seen per `file *` / `field *` rule and name ("file:name").
        var repeats: [String: Int] = [:]
        /// Parts seen per named rule, by the rule's box.
        var ruleRepeats = RuleTally()
        /// Every part name seen, for `duplicate-name` and `name-collision`.
        var names = FormNameRegistry()
        /// The required rules a part satisfied, by identity: the boxes `route.required` lists are those
        /// `rule(in:forPart:isFile:)` gives parts (and a route cannot name a part twice: `formwall check`).
        var satisfied = RuleTally()
        var checkRequired = false

        init() {}

        /// A copy for an evaluator that shares this body with a copy of itself.
        func copy() -> Body {
            let other = Body()
            other.bodyBytes = bodyBytes
            other.bodyExceeded = bodyExceeded
            other.parts = parts
            other.files = files
            other.fields = fields
            other.repeats = repeats
            other.ruleRepeats = ruleRepeats
            other.names = names
            other.satisfied = satisfied
            other.checkRequired = checkRequired
            return other
        }
    }

    final class Part: StateObject {
        let index: Int
        let name: String?
        let filename: String?
        /// The part's rule, held by reference (its route's box of it).
        var rule: Shared<PartRule>?
        let declaredType: String?
        var size: UInt64 = 0
        var sizeExceeded = false
        var sniffed = false
        var valueChecked = false
        var action: Action = .forward
        var isFile: Bool { filename != nil }

        init(index: Int, name: String?, filename: String?, declaredType: String?) {
            self.index = index
            self.name = name
            self.filename = filename
            self.declaredType = declaredType
        }

        /// A copy for an evaluator that shares this part with a copy of itself.
        func copy() -> Part {
            let other = Part(index: index, name: name, filename: filename, declaredType: declaredType)
            other.rule = rule
            other.size = size
            other.sizeExceeded = sizeExceeded
            other.sniffed = sniffed
            other.valueChecked = valueChecked
            other.action = action
            return other
        }
    }

    /// Makes `object` (the body or the part) this evaluator's own before it is changed: a copy if a copy of the
    /// evaluator shares it.
    static func own<Object: StateObject>(_ object: inout Object) {
        if !isKnownUniquelyReferenced(&object) { object = object.copy() }
    }

    /// The policy being applied.
    public var policy: Policy { plan.policy }
    /// The route chosen by `begin`; nil before it. A copy of the whole route (a retain and a release of every
    /// array and string in it): the proxy's per-request reads use the fields below, read in place.
    public var route: Route? { routeBox?.value }
    /// The chosen route's `upstream` group name; nil before `begin` or without one.
    public var routeUpstreamName: String? { routeBox?.value.upstream?.name }
    /// The chosen route's `modified-header` field name.
    public var routeModifiedHeader: String? { routeBox?.value.modifiedHeader }
    /// The chosen route's `upstream-body` mode, if it sets one.
    public var routeUpstreamBody: UpstreamBodyMode? { routeBox?.value.upstreamBody ?? nil }
    /// The chosen route's prefix.
    public var routePrefix: String? { routeBox?.value.prefix }
    /// The chosen route's `reencode` setting.
    public var routeReencode: ReencodeMode? { routeBox?.value.reencode }
    /// The chosen route's `compression-ratio-max`.
    public var routeCompressionRatioMax: Int? { routeBox?.value.compressionRatioMax }
    /// Where the chosen route is written.
    public var routeLocation: SourceLocation? { routeBox?.value.location ?? nil }
    /// The prefix of the route that matched the request (nil: none did, the fallback applies, or before `begin`).
    public var matchedRoutePrefix: String? { matchedRoute.map { plan.routes[$0].value.prefix } }
    // The policy and the route never change under an evaluator (the route once `begin` chose it), so they are
    // held by reference: the proxy copies the evaluator whenever it updates it, and inline they made each copy
    // about 2 KB of bytes plus a retain and a release of every array and string in them. The plan is made once
    // per policy (`fresh()` shares a template's), and `begin` picks one of its routes.
    let plan: PolicyPlan
    private(set) var routeBox: RouteBox?
    /// The index in `policy.routes` of the route that matched; nil for the fallback.
    private var matchedRoute: Int?
    /// Every violation seen so far with what was decided, in order.
    public private(set) var findings: [Finding] = []
    var state: State = .idle
    var regexes: [String: Regex<AnyRegexOutput>] = [:]
    /// The names of the request target's query parameters, decoded, for `query-collision`.
    var queryNames: Set<String> = []

    /// Creates an evaluator for one request.
    public init(policy: Policy) { plan = PolicyPlan(policy) }

    private init(plan: PolicyPlan) { self.plan = plan }

    /// A fresh evaluator for this one's policy, sharing its plan: `init(policy:)` prepares (and copies) the whole
    /// policy, which a proxy would otherwise do for every request. A method, not an initialiser taking the
    /// template: called on a template a class holds, it reads the plan in place, where passing the template to an
    /// initialiser copied it (every reference it holds retained).
    public func fresh() -> PolicyEvaluator { PolicyEvaluator(plan: plan) }

    /// The rejection, once the request has been rejected (enforce mode only).
    public var rejection: Violation? {
        if case .rejected(let violation) = state { return violation }
        return nil
    }

    /// The mode this request is judged in: its route's `mode`, else the policy's.
    public var mode: PolicyMode { routeBox?.value.mode ?? plan.policy.mode }

    var isMonitoring: Bool { mode == .monitor }

    // MARK: - Request

    /// Starts the request: picks the route and checks method, Content-Type and Content-Length.
    ///
    /// `contentLength` is nil for a body of unknown length (chunked) and 0 for no body.
    ///
    /// `preflight` says the request is a CORS preflight (`OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`, no body): under `preflight pass` (the default) `methods` does not apply.
    ///
    /// `host` is the request's Host field (routes with `host` match on it); `headerValues` gives every value
    /// of a request field by name, case-insensitive, in order (for `require-header`).
    public mutating func begin(method: String, path: String, host: String? = nil, contentType: String?,
                               contentLength: UInt64?, preflight: Bool = false,
                               methodOverrides: [(name: String, value: String)] = [],
                               headerValues: (String) -> [String] = { _ in [] }) -> BeginDecision {
        guard case .idle = state else {
            if case .rejected(let violation) = state { return .reject(violation) }
            return .reject(outOfOrderViolation("begin called twice"))
        }
        matchedRoute = plan.routeIndex(for: path, host: host)
        let route = matchedRoute.map { plan.routes[$0] } ?? plan.fallback
        routeBox = route
        queryNames = Self.queryNames(of: path)
        let body = Body()
        state = .receiving(body)
        if let violation = plan.ambiguousPath(path, host: host, route: matchedRoute) {
            if case .reject(let violation) = violate(violation, .reject) { return .reject(violation) }
        }
        let exempt = preflight && route.value.preflight == .pass && contentLength == 0
        if let methods = route.value.methods, !methods.contains(method), !exempt {
            let violation = Violation(kind: .methodNotAllowed, rule: route.value.location,
                                      detail: "\(method) not in \(methods.joined(separator: " "))")
            if case .reject(let violation) = violate(violation, .reject) { return .reject(violation) }
        }
        if let methods = route.value.methods, !exempt,
           !methodOverrides.isEmpty || queryNames.contains(Self.methodParameter),
           let violation = Self.overriddenMethodNotAllowed(methods, methodOverrides, path, route.value.location) {
            if case .reject(let violation) = violate(violation, .reject) { return .reject(violation) }
        }
        for condition in route.value.requiredHeaders {
            guard let detail = unmet(condition, values: headerValues(condition.name)) else { continue }
            let violation = Violation(kind: .headerRequired, rule: route.value.location, detail: detail)
            if case .reject(let violation) = violate(violation, .reject) { return .reject(violation) }
        }
        let hasBody = contentLength != 0
        // One reading of the Content-Type (`type/subtype`, lowercased); nothing is built for a type sent as its own
        // essence.
        let essence = contentType.flatMap(MediaTypePattern.essenceText(of:))
        let isMultipart = essence?.hasPrefix("multipart/") == true
        if !hasBody, isMultipart {
            // A multipart body needs at least its close delimiter. Frameworks read an empty one as an empty form,
            // a 400 or a 500.
            let violation = Violation(kind: .malformedBody, rule: route.value.location,
                                      detail: "an empty multipart body (no close delimiter)")
            if case .reject(let violation) = violate(violation, .reject) { return .reject(violation) }
        }
        var kind = BodyKind.none
        if hasBody {
            if let essence, route.value.contentTypes.contains(where: { $0.matches(essenceText: essence) }) {
                kind = isMultipart ? .multipart : essence == "application/x-www-form-urlencoded" ? .urlencoded : .opaque
            } else {
                let sent = essence ?? (contentType == nil ? "no Content-Type" : "malformed Content-Type")
                let allowed = route.value.contentTypes.map(\.description).joined(separator: " ")
                let violation = Violation(kind: .contentTypeNotAllowed, rule: route.value.location,
                                          detail: "\(sent) not in \(allowed)")
                if case .reject(let violation) = violate(violation, .reject) { return .reject(violation) }
                kind = isMultipart ? .multipart : .opaque
            }
        }
        if let length = contentLength, length > route.value.limits.bodyMax {
            let violation = Violation(kind: .bodyTooLarge, rule: route.value.location,
                                      detail: ByteSize.exceeds(length, route.value.limits.bodyMax) + " (Content-Length)",
                                      limit: route.value.limits.bodyMax)
            if case .reject(let violation) = violate(violation, .reject) { return .reject(violation) }
        }
        body.checkRequired = kind == .multipart || kind == .urlencoded
            || (!hasBody && ["POST", "PUT", "PATCH"].contains(method))
        state = .receiving(body)
        return .proceed(kind)
    }

    /// An `ambiguous_path` detail: the two routes and who reads the path the other way. The client's path is
    /// quoted as that reading sees it, cut at 200 bytes.
    static func detail(of ambiguity: PathAmbiguity, routed: Int?, in policy: Policy) -> String {
        "the path falls under \(policy.describeRoute(routed)) here, but \(ambiguity.reading.readers) read it as '"
            + clipped(ambiguity.path, to: 200) + "', under \(policy.describeRoute(ambiguity.route))"
    }

    /// `text` cut to its first `limit` bytes, with `…` after them: details that quote the client stay short.
    static func clipped(_ text: String, to limit: Int) -> String {
        text.utf8.count > limit ? String(decoding: text.utf8.prefix(limit), as: UTF8.self) + "…" : text
    }

    /// The detail of a method override whose value, uppercased as the frameworks read it, `methods` does not list
    /// (`DELETE (X-HTTP-Method-Override) not in POST PUT`); nil when it lists it.
    static func unlistedOverride(_ value: String, from source: String, _ methods: [String]) -> String? {
        let wanted = value.uppercased()
        guard !methods.contains(wanted) else { return nil }
        return "\(clipped(wanted, to: 32)) (\(source)) not in \(methods.joined(separator: " "))"
    }

    /// The query parameter Symfony (with `enableHttpMethodParameterOverride`) and Laravel read as the method.
    static let methodParameter = "_method"

    /// The `method_not_allowed` violation of a request whose method-override fields or `_method` query parameter
    /// name a method `methods` does not list: Symfony and Rack read `X-HTTP-Method-Override` on a POST as the
    /// method, Express's method-override the three fields, so `methods POST;` would let a DELETE through. Each
    /// value is judged as those frameworks read it, uppercased. Nil when every one is allowed.
    static func overriddenMethodNotAllowed(_ methods: [String], _ overrides: [(name: String, value: String)],
                                           _ target: String, _ location: SourceLocation?) -> Violation? {
        let named = overrides.map { ($0.value, $0.name) } + queryValues(of: target, named: methodParameter)
            .map { ($0, "the \(methodParameter) query parameter") }
        for (value, source) in named {
            guard let detail = unlistedOverride(value, from: source, methods) else { continue }
            return Violation(kind: .methodNotAllowed, rule: location, detail: detail)
        }
        return nil
    }

    /// Calls `body` with each query parameter of a request target: its name decoded (`+` is a space, malformed
    /// escapes stay as written) and its value's bytes as written (nil for a parameter without `=`).
    static func forEachQueryParameter(of target: String,
                                      _ body: (_ name: String, _ value: Substring.UTF8View?) -> Void) {
        // Most targets have no query: a scan of their contiguous bytes says so (the UTF-8 view's own search costs
        // some 230 instructions for `/upload`).
        let hasQuery = target.utf8.withContiguousStorageIfAvailable { $0.contains(UInt8(ascii: "?")) } ?? true
        guard hasQuery, let mark = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return }
        for pair in target.utf8[target.utf8.index(after: mark)...].split(separator: UInt8(ascii: "&")) {
            let raw = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            body(decodedQueryText(raw[0]), raw.count > 1 ? raw[1] : nil)
        }
    }

    /// A query name or value decoded: `+` is a space, malformed escapes stay as written.
    static func decodedQueryText(_ bytes: Substring.UTF8View) -> String {
        String(decoding: Percent.decode(bytes, plusIsSpace: true), as: UTF8.self)
    }

    /// The decoded values of the query parameter `name` in a request target, in order (`a` alone has the value "").
    static func queryValues(of target: String, named name: String) -> [String] {
        var values: [String] = []
        forEachQueryParameter(of: target) { parameter, value in
            if parameter == name { values.append(value.map(decodedQueryText) ?? "") }
        }
        return values
    }

    /// The decoded names of the query parameters in a request target (`/p?a=1&b` → a, b).
    static func queryNames(of target: String) -> Set<String> {
        var names: Set<String> = []
        forEachQueryParameter(of: target) { name, _ in
            if !name.isEmpty { names.insert(name) }
        }
        return names
    }

    /// Counts the first of `count` body bytes that fit under the route's `body-max` (all of them when nothing
    /// is counted or the limit has been passed already) and says how many it counted. A body stage parses those
    /// before it counts the rest (`FormStage.feedBody`), so that a body's verdict does not depend on how it was
    /// cut into reads.
    public mutating func bodyDataWithinLimit(count: Int) -> (counted: Int, action: Action) {
        var counted = count
        if let left = bodyRoom, left < UInt64(max(count, 0)) { counted = Int(left) }
        return (counted, bodyData(count: counted))
    }

    /// How many more body bytes `bodyData` counts before the route's `body-max` is passed; nil when nothing is
    /// counted (before `begin`, after `end` or a rejection) or once it has been passed.
    private var bodyRoom: UInt64? {
        guard let route = routeBox else { return nil }
        let counted: Body
        switch state {
        case .receiving(let body): counted = body
        case .inPart(let body, _): counted = body
        case .idle, .rejected, .finished: return nil
        }
        let limit = route.value.limits.bodyMax
        guard !counted.bodyExceeded, counted.bodyBytes <= limit else { return nil }
        return limit - counted.bodyBytes
    }

    /// Counts `count` raw body bytes as received (after de-chunking); rejects once `body-max` is crossed.
    public mutating func bodyData(count: Int) -> Action {
        guard let route = routeBox else { return outOfOrder("bodyData before begin") }
        return withBody("bodyData") { evaluator, body in
            body.bodyBytes = body.bodyBytes.addingSaturating(UInt64(clamping: count))
            guard body.bodyBytes > route.value.limits.bodyMax, !body.bodyExceeded else { return .forward }
            body.bodyExceeded = true
            let violation = Violation(kind: .bodyTooLarge, rule: route.value.location,
                                      detail: ByteSize.exceeds(body.bodyBytes, route.value.limits.bodyMax),
                                      limit: route.value.limits.bodyMax)
            return evaluator.violate(violation, .reject)
        }
    }

    /// Applies the actions for request-level anomaly flags (boundary, preamble, epilogue).
    public mutating func anomalies(_ flags: MultipartAnomalies) -> Action {
        guard let route = routeBox else { return outOfOrder("anomalies before begin") }
        return withBody("anomalies") { evaluator, _ in
            evaluator.applyAnomalies(flags, route: route, part: nil, index: nil)
        }
    }

    /// The body could not be parsed: 400 `malformed_body`.
    public mutating func malformed(detail: String) -> Action {
        guard let route = routeBox else { return outOfOrder("malformed before begin") }
        return withBody("malformed") { evaluator, _ in
            evaluator.violate(Violation(kind: .malformedBody, rule: route.value.location, detail: detail), .reject)
        }
    }

    /// Ends the request: checks `required` rules (422). Call it for requests without a body too.
    public mutating func end() -> Action {
        guard let route = routeBox else { return outOfOrder("end before begin") }
        switch state {
        case .idle: return outOfOrder("end before begin")
        case .finished: return outOfOrder("end called twice")
        case .inPart: return outOfOrder("end called inside a part")
        case .rejected(let violation): return .reject(violation)
        case .receiving(let body):
            state = .finished
            guard body.checkRequired else { return .forward }
            for box in route.required where !body.satisfied.contains(ObjectIdentifier(box)) {
                let rule = box.value
                guard let name = rule.name else { continue }
                let violation = Violation(kind: .missingRequired, part: name, rule: rule.location,
                                          detail: "required \(rule.kind.rawValue) '\(name)' is missing",
                                          statusOverride: rule.status)
                let action = violate(violation, rule.action == .log ? .log : .reject)
                if case .reject = action { return action }
            }
            return .forward
        }
    }

    // MARK: - Shared helpers

    /// Runs `body` on the request state (inside or between parts); answers the rejection if there is one.
    private mutating func withBody(_ call: String, _ work: (inout PolicyEvaluator, inout Body) -> Action) -> Action {
        switch state {
        case .idle:
            return outOfOrder(call + " before begin")
        case .finished:
            return outOfOrder(call + " after end")
        case .rejected(let violation):
            return .reject(violation)
        case .receiving, .inPart:
            break
        }
        // `if case`, not `switch`: a switch keeps its subject's copy of the body alive through the case, and
        // `own` would then copy the body at every call.
        var taken = takeState()
        if case .receiving(var body) = taken {
            taken = .idle
            Self.own(&body)
            let action = work(&self, &body)
            if case .idle = state { state = .receiving(consume body) }
            return action
        }
        if case .inPart(var body, let part) = taken {
            taken = .idle
            Self.own(&body)
            let action = work(&self, &body)
            if case .idle = state { state = .inPart(consume body, part) }
            return action
        }
        // Unreachable: checked just above.
        state = taken
        return outOfOrder(call + " in a state it cannot take")
    }

    /// Moves the state out, leaving `.idle`. A `switch state` binding copies the payloads (a retain and a release
    /// of every collection and string in the body and the part, on every call) and leaves the state sharing
    /// them, so the body's collections would be copied when updated; a taken state is moved, and its payloads
    /// are the only references. The caller puts the state back.
    mutating func takeState() -> State {
        var taken = State.idle
        swap(&taken, &state)
        return taken
    }

    // The pattern for every update of a payload: take the state into a local, bind its payloads, then drop
    // the local (`taken = .idle`) before changing them, so that they are the only references (a binding
    // copies, and a copy still held by `taken` or by the state would make an update copy the collection:
    // per part, a cost growing with the parts seen); put them back with `consume`.

    /// `work` applied to the body of the part being received, in place; nil (and nothing done) outside a part.
    mutating func updateBodyInPart<R>(_ work: (inout Body) -> R) -> R? {
        guard case .inPart = state else { return nil }
        var taken = takeState()
        guard case .inPart(var body, let part) = taken else { state = taken; return nil }
        taken = .idle
        Self.own(&body)
        let result = work(&body)
        state = .inPart(consume body, part)
        return result
    }

    /// Puts `part` in place of the part being received, keeping the body; nothing done outside a part.
    mutating func replaceCurrentPart(with part: Part) {
        guard case .inPart = state else { return }
        var taken = takeState()
        guard case .inPart(let body, _) = taken else { state = taken; return }
        taken = .idle
        state = .inPart(consume body, part)
    }

    /// Answers a call made in the wrong state: a proxy bug, not a policy matter, so it rejects in monitor mode
    /// too. The request fails with 500 `internal_error`, and every later call answers the same.
    mutating func outOfOrder(_ call: String) -> Action { .reject(outOfOrderViolation(call)) }

    private mutating func outOfOrderViolation(_ call: String) -> Violation {
        let violation = Violation(kind: .internalError, rule: routeBox?.value.location,
                                  detail: "policy evaluator called out of order: \(call)")
        findings.append(Finding(violation: violation, outcome: .reject, enforced: true))
        state = .rejected(violation)
        return violation
    }

    /// Records a violation with its outcome and answers what the proxy does now.
    ///
    /// Enforce: `reject` moves to `.rejected`; strip and quarantine are returned for the caller to
    /// fold into the part. Monitor: everything is `forward`.
    mutating func violate(_ violation: Violation, _ outcome: Finding.Outcome) -> Action {
        findings.append(Finding(violation: violation, outcome: outcome, enforced: !isMonitoring))
        guard !isMonitoring else { return .forward }
        switch outcome {
        case .reject:
            state = .rejected(violation)
            return .reject(violation)
        case .strip: return .strip(violation)
        case .quarantine: return .quarantine(violation)
        case .log, .sanitize: return .forward
        }
    }

    private mutating func applyAnomalies(_ flags: MultipartAnomalies, route: RouteBox, part: String?,
                                         index: Int?) -> Action {
        for flag in flags {
            let outcome: Finding.Outcome
            switch route.value.anomalies[flag] {
            case .allow: continue
            case .log: outcome = .log
            // `strip` is refused for request-level flags when the rule file loads; should one arrive, fail closed.
            case .reject, .strip: outcome = .reject
            }
            let violation = Violation(kind: .anomaly(flag), part: part, partIndex: index, rule: route.value.location,
                                      detail: "multipart anomaly \(flag.name)")
            if case .reject(let violation) = violate(violation, outcome) { return .reject(violation) }
        }
        return .forward
    }

    /// Why `values` fail `condition` (never quoting a value: it may be a secret), nil when they pass.
    /// With a regex every value must contain a match, so a repeated field cannot slip one past it.
    mutating func unmet(_ condition: HeaderCondition, values: [String]) -> String? {
        guard !values.isEmpty else { return "\(condition.name) missing" }
        guard let pattern = condition.pattern else { return nil }
        let expression = regex(for: pattern)
        for value in values {
            let matched = (try? expression.firstMatch(in: value)) != nil
            if !matched { return "\(condition.name) does not match \(pattern.source)" }
        }
        return nil
    }

    static func key(_ kind: PartRule.Kind, _ name: String) -> String { kind.rawValue + ":" + name }

    mutating func regex(for pattern: FieldPattern) -> Regex<AnyRegexOutput> {
        if let cached = regexes[pattern.source] { return cached }
        let compiled = pattern.compile()
        regexes[pattern.source] = compiled
        return compiled
    }
}

extension UInt64 {
    /// `self + other`, or `UInt64.max` instead of an overflow trap.
    func addingSaturating(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}

/// An immutable value held by reference, so that copying its holder copies one reference.
final class Shared<Value: Sendable>: Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// A policy prepared for evaluation, once per policy: each route held by reference with its part rules, so a
/// request picks its route, and a part its rule, without copying either.
final class PolicyPlan: Sendable {
    let policy: Policy
    /// `policy.routes`, in order.
    let routes: [RouteBox]
    /// `policy.fallback`.
    let fallback: RouteBox

    init(_ policy: Policy) {
        self.policy = policy
        routes = policy.routes.map(RouteBox.init)
        fallback = RouteBox(policy.fallback)
    }

    /// `policy.routeIndex(for:host:)`, called where the policy lies: through `plan.policy` from an evaluator, the
    /// whole policy was copied first.
    func routeIndex(for path: String, host: String?) -> Int? {
        policy.routeIndex(for: path, host: host)
    }

    /// The `ambiguous_path` violation of a request `routeIndex` sent to `route`, under `ambiguous-paths reject`
    /// (`Policy.ambiguity(for:host:route:)`); else nil. Called here for the same reason, and out of line: inlined,
    /// it grew `PolicyEvaluator.begin` past what the optimiser inlines into it (some 500 instructions a request).
    @inline(never)
    func ambiguousPath(_ path: String, host: String?, route: Int?) -> Violation? {
        guard policy.ambiguousPaths == .reject, let ambiguity = policy.ambiguity(for: path, host: host, route: route)
        else { return nil }
        let location = route.map { policy.routes[$0].location } ?? policy.fallback.location
        return Violation(kind: .ambiguousPath, rule: location,
                         detail: PolicyEvaluator.detail(of: ambiguity, routed: route, in: policy))
    }
}

/// A route held by reference, with its part rules boxed the same way (`PolicyEvaluator.rule(in:forPart:isFile:)`).
final class RouteBox: Sendable {
    let value: Route
    let files: [Shared<PartRule>]
    let fields: [Shared<PartRule>]
    let otherFiles: Shared<PartRule>?
    let otherFields: Shared<PartRule>?
    /// `Route.requiredRules`, the same boxes: fields then files.
    let required: [Shared<PartRule>]

    init(_ route: Route) {
        value = route
        files = route.files.map(Shared.init)
        fields = route.fields.map(Shared.init)
        otherFiles = route.otherFiles.map(Shared.init)
        otherFields = route.otherFields.map(Shared.init)
        required = (fields + files).filter(\.value.required)
    }
}

/// Counts per rule, by the identity of the rule's box: the first rule counted in place, the others in a list. A
/// route names few rules and a body's parts fall under fewer still, so a linear search costs less than hashing, and
/// a body whose parts fall under one rule allocates nothing (a dictionary reserved room at every request's first
/// part: some 1,100 instructions). The list holds at most one entry per rule of the route, which the rule file
/// bounds, not the client.
struct RuleTally: Sendable, CustomStringConvertible {
    private var first: ObjectIdentifier?
    private var firstCount = 0
    private var rest: [(rule: ObjectIdentifier, count: Int)] = []

    init() {}

    /// Adds one to `rule`'s count; returns the new count.
    mutating func increment(_ rule: ObjectIdentifier) -> Int {
        if first == rule {
            firstCount += 1
            return firstCount
        }
        if first == nil {
            first = rule
            firstCount = 1
            return 1
        }
        for index in rest.indices where rest[index].rule == rule {
            rest[index].count += 1
            return rest[index].count
        }
        rest.append((rule, 1))
        return 1
    }

    /// Marks `rule` as seen (a count of at least one).
    mutating func insert(_ rule: ObjectIdentifier) {
        if !contains(rule) { _ = increment(rule) }
    }

    /// Whether `rule` was counted.
    func contains(_ rule: ObjectIdentifier) -> Bool { first == rule || rest.contains { $0.rule == rule } }

    var description: String {
        ((first.map { [($0, firstCount)] } ?? []) + rest).map { "\($0.0): \($0.1)" }.joined(separator: ", ")
    }
}
