import Audit
import HTTP1
import Quarantine
import Reactor
import Rules

// A harness that drives one ConnectionMachine with no socket: a fake clock, client bytes in chosen pieces and a
// scripted upstream. Used by Tests/ProxyTests and by the whole-path fuzzer (fuzz/ExchangeFuzz.swift); it is
// compiled into the Proxy module so both share it, and nothing in the proxy calls it.
//
//   client pieces ──► clientIn ─┐                         ┌─► upstreamOut ──► scripted upstream (reads all, or
//                               ├─► ConnectionMachine ────┤                    n bytes then fails the write)
//   clientReceived ◄─ clientOut ┘     ▲ actions recorded  └─◄ upstreamIn ◄── response: at the head, after n body
//                                     │                                      bytes, at the end, or never; then
//                                  fake clock                                stays open, closes, resets, stalls

/// Drives one machine through a whole conversation and records what each side saw.
final class ExchangeRig {
    /// How the fake upstream behaves, for every connection the machine asks for.
    struct UpstreamScript: Sendable {
        enum Connect: Sendable { case accept, refuse, ignore }
        enum Answer: Sendable { case atHead, afterBodyBytes(Int), atEnd, never }
        enum Then: Sendable { case stayOpen, close, reset, stall }
        var connect: Connect = .accept
        var answer: Answer = .atEnd
        var response: [UInt8] = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
        var then: Then = .stayOpen
        /// Reads at most this many request bytes per connection, then its reads fail (a reset).
        var readLimit: Int?
        /// Accepts at most this many request bytes per step (a short write, as from a full socket buffer), so
        /// part data lent from the client's buffer waits and is settled; nil: everything queued.
        var window: Int?
        /// Delivers at most this many response bytes per step (the upstream's reads as the kernel splits them);
        /// nil: as much as `upstreamIn` has room for.
        var responsePiece: Int?
        /// The first connection comes from the pool (and may be replayed).
        var firstIsPooled = false
        /// The first connection, if pooled, was already closed by the upstream: it fails before any answer.
        var firstIsStale = false
        /// A stale first connection fails only once it has received this many bytes (default: its first write),
        /// so the client may send more in between.
        var staleAfter = 1
        /// Servers of a group (by index: the first dial is server 0, each `retryUpstream` the next) that refuse,
        /// or never answer the connect, whatever `connect` says.
        var refuseServers: Set<Int> = []
        /// A slow application: it answers this many nanoseconds of the clock after `answer` says it would.
        var answerDelay: UInt64 = 0
        /// What the antivirus answers for every `.scanFile`.
        var scanVerdict: FormStage.ScanVerdict = .clean
        var ignoreServers: Set<Int> = []
        init() {}
    }

    /// A context with a fixed policy, deterministic ids and a fixed clock for records.
    final class Context: ExchangeContext {
        let sharedConfig: SharedConfiguration
        var policy: Policy?
        var quarantine: QuarantineStore? { nil }
        var draining = false
        /// Pools as a worker keeps them, so that the rig's requests reuse storage as the worker's do.
        let pools: RequestPools?
        private var ids = 0
        init(config: ProxyConfiguration, policy: Policy?) {
            self.sharedConfig = SharedConfiguration(config)
            self.policy = policy
            pools = RequestPools(replayLimit: config.pool.replayLimit)
        }
        func newRequestID() -> String {
            ids += 1
            return "rig\(ids)"
        }
        /// Boundaries fail (as when the CSPRNG does) while this is set.
        var randomFails = false
        func newBoundary() -> [UInt8]? { randomFails ? nil : Array("RigBoundary0123456789abcdefXYZ".utf8) }
        func timestamp() -> AuditTimestamp { AuditTimestamp(millisecondsSinceEpoch: 1_700_000_000_000) }
    }

    /// One upstream connection as the fake upstream saw it.
    struct UpstreamConnectionLog {
        var received: [UInt8] = []
        var pooled = false
        var stale = false
        var answered = false
        /// When the upstream, ready to answer, answers (`answerDelay` after it was ready).
        var answerDueAt: UInt64?
        var responseOffset = 0
        var ended = false
        var readFailed = false
    }

    typealias Action = ConnectionMachine.Action
    typealias Event = ConnectionMachine.Event

    let context: Context
    let script: UpstreamScript
    private(set) var machine: ConnectionMachine
    private(set) var now: UInt64 = 1_000_000_000
    private(set) var actions: [Action] = []
    private(set) var clientReceived: [UInt8] = []
    private(set) var connections: [UpstreamConnectionLog] = []
    private(set) var records: [AuditRecord?] = []
    /// The `.log` lines, as the driver would print them.
    private(set) var logs: [String] = []
    private(set) var shutdownSent = false
    private(set) var closed = false
    /// The client connection ended with a reset (`.resetClient`), not a FIN.
    private(set) var resetSent = false
    private(set) var released: [Bool] = []
    /// `.scanFile` actions (antivirus scans asked for).
    private(set) var scans = 0
    /// `upstreamHealth` reports: (server, ok, the failure's reason).
    private(set) var health: [(server: Int, ok: Bool, reason: String?)] = []
    /// The server index the rig reports for the current dial: 0, then one more per `retryUpstream`.
    private var serversTried = 0
    /// An action came after `.closeClient` (an invariant violation).
    private(set) var actionAfterClose = false
    private var current: Int?
    /// A counter read just before and just after each `machine.handle` (a test's allocation counter); what it
    /// rose by inside the machine adds up in `metered`, so a test can tell the machine's share from the rig's.
    var meter: (() -> UInt64)?
    private(set) var metered: UInt64 = 0
    private var queue: [Event] = []
    private var batch: [Action] = []
    /// A slow client: it takes at most this many response bytes per second of the clock (nil: all at once).
    var clientReadRate: Int? {
        didSet { clientReadBudget = clientReadRate ?? .max }
    }
    private var clientReadBudget = Int.max
    /// The upstream takes no request byte while set (it holds the body up).
    var upstreamPaused = false
    /// The time between two ticks (the worker's timer fires about once a second, never early).
    var tickNanos: UInt64 = 1_000_000_000

    init(config: ProxyConfiguration, policy: Policy?, script: UpstreamScript = UpstreamScript()) {
        context = Context(config: config, policy: policy)
        self.script = script
        machine = ConnectionMachine(context: context, peer: "127.0.0.1:40000", now: now)
    }

    /// A configuration for the rig: an unused upstream address and the given spool directory.
    /// The rig never dials either address; resolving them can only fail if the resolver itself is broken.
    static func configuration(spoolDirectory: String = "/tmp") throws -> ProxyConfiguration {
        var config = ProxyConfiguration(listen: try SocketAddress.resolve("127.0.0.1:1"),
                                        upstream: .init(address: try SocketAddress.resolve("127.0.0.1:2"),
                                                        authority: "127.0.0.1:2"))
        config.spoolDirectory = spoolDirectory
        config.audit = .init(path: "-")
        return config
    }

    /// `configuration` with the small buffers the fuzz harnesses (fuzz/ExchangeFuzz.swift, fuzz/ResponseFuzz.swift)
    /// and the tests keeping their findings use, so that 4 KiB inputs reach the buffer limits: 4 KiB client reads,
    /// a 2 KiB output high-water mark, 8 KiB of lingering.
    static func fuzzConfiguration(spoolDirectory: String = "/tmp") throws -> ProxyConfiguration {
        var config = try configuration(spoolDirectory: spoolDirectory)
        config.buffers.clientRead = 4096
        config.buffers.outputHighWater = 2048
        config.linger.bytes = 8192
        return config
    }

    // MARK: Driving

    /// Sends `bytes` in pieces of the given sizes (cycled; 0 means the rest), then EOF if asked, then lets the
    /// clock run past every deadline. With `waitForClock: false` it stops, rather than let time pass, when the
    /// machine stops reading. Returns how many of `bytes` were sent.
    @discardableResult
    func run(client bytes: [UInt8], pieces: [Int] = [], clientEOF: Bool = true, advanceTime: Bool = true,
             waitForClock: Bool = true) -> Int {
        var at = 0
        var piece = 0
        while at < bytes.count && !closed {
            pumpIO()
            guard machine.wantsClientRead else {
                // The machine does not read: it must be waiting for the upstream or for the clock.
                if !waitForClock { return at }
                if !progressWithoutClient() { break }
                continue
            }
            let room = machine.clientIn.maxCapacity - machine.clientIn.readableBytes
            guard room > 0 else {
                if !progressWithoutClient() { break }
                continue
            }
            var size = pieces.isEmpty ? bytes.count - at : pieces[piece % pieces.count]
            piece += 1
            if size <= 0 { size = bytes.count - at }
            let n = min(size, room, bytes.count - at)
            // As ClientConnection.readClient: nothing may point into clientIn when it is read into.
            machine.settleClientInput()
            poisonConsumedInput()
            _ = try? machine.clientIn.writeBytes(bytes[at..<(at + n)])
            at += n
            send(.clientData)
        }
        pumpIO()
        if clientEOF && !closed {
            send(.clientEOF)
            pumpIO()
        }
        if advanceTime { runClock() }
        return at
    }

    /// Forgets what the run recorded so far (actions, bytes each side saw, records, logs, finished upstream
    /// connections), keeping the storage. A long keep-alive run that calls it between requests measures the
    /// machine, not the rig's growing history (Tests/ProxyTests/AllocationCountTests.swift).
    func forgetHistory() {
        actions.removeAll(keepingCapacity: true)
        clientReceived.removeAll(keepingCapacity: true)
        records.removeAll(keepingCapacity: true)
        logs.removeAll(keepingCapacity: true)
        released.removeAll(keepingCapacity: true)
        health.removeAll(keepingCapacity: true)
        scans = 0
        // The connection in use (if any) keeps its state; released ones are gone.
        if current == nil { connections.removeAll(keepingCapacity: true) }
    }

    /// Advances the clock a second at a time (at most `limit` seconds) until the machine is closed or idle.
    func runClock(limit: Int = 400) {
        for _ in 0..<limit where !closed {
            if machine.isIdle && queue.isEmpty { return }
            advanceClock()
            pumpIO()
        }
    }

    /// One second passes: the timer fires, and a slow client may read its next second's worth.
    private func advanceClock() {
        now += tickNanos
        clientReadBudget = clientReadRate ?? .max
        send(.timer)
    }

    /// Moves the clock without a tick (something happens between two ticks), then lets bytes move.
    func elapse(_ nanos: UInt64) {
        now += nanos
        pumpIO()
    }

    /// Overwrites the client bytes the machine already consumed, as the driver's next read may: part data still
    /// lent from them (not settled) would reach the upstream as 0xEE bytes.
    private func poisonConsumedInput() {
        let input = machine.clientIn
        let consumed = input.discardableBytes
        // Bytes before `poisoned` were overwritten last time, unless the buffer was compacted since.
        let from = poisoned <= consumed ? poisoned : 0
        if consumed > from { input.setBytes(repeatElement(0xEE, count: consumed - from), at: from) }
        poisoned = consumed
    }
    private var poisoned = 0

    /// When the client does not read: let the upstream and the clock move; false if nothing can move.
    private func progressWithoutClient() -> Bool {
        let before = (clientReceived.count, connections.map(\.received.count), records.count)
        pumpIO()
        if closed { return false }
        if (clientReceived.count, connections.map(\.received.count), records.count) != before { return true }
        if machine.wantsClientRead { return true }
        // Only time can help now (a stalled upstream, a slow client, a pending timeout).
        advanceClock()
        return !closed
    }

    /// Sends one event and carries out its actions.
    func send(_ event: Event) {
        guard !closed else { return }
        batch.removeAll(keepingCapacity: true)
        if let meter {
            let start = meter()
            machine.handle(event, now: now, into: &batch)
            metered += meter() - start
        } else {
            machine.handle(event, now: now, into: &batch)
        }
        for action in batch { apply(action) }
    }

    private func apply(_ action: Action) {
        if closed { actionAfterClose = true }
        actions.append(action)
        switch action {
        case .connectUpstream, .reconnectUpstream, .retryUpstream:
            if case .connectUpstream = action { serversTried = 0 }
            if case .retryUpstream = action { serversTried += 1 }
            let server = serversTried
            let first = connections.isEmpty
            var log = UpstreamConnectionLog()
            log.pooled = first && script.firstIsPooled
            log.stale = log.pooled && script.firstIsStale
            connections.append(log)
            current = connections.count - 1
            queue.append(.upstreamChosen(server: server))
            let connect = script.refuseServers.contains(server) ? .refuse
                : script.ignoreServers.contains(server) ? .ignore : script.connect
            switch connect {
            case .accept: queue.append(.upstreamConnected(reused: log.pooled, server: server))
            case .refuse: queue.append(.upstreamConnectFailed("connection refused", server: server))
            case .ignore: break
            }
        case .scanFile:
            scans += 1
        case .scanInputEnded(let id):
            queue.append(.scanResult(script.scanVerdict, id: id))
        case .upstreamHealth(_, let server, let failure):
            health.append((server, failure == nil, failure?.reason))
        case .releaseUpstream(let reuse):
            released.append(reuse)
            current = nil
        case .shutdownClientWrite:
            shutdownSent = true
        case .closeClient:
            closed = true
        case .resetClient:
            closed = true
            resetSent = true
        case .requestCounted:
            records.append(nil)
        case .requestEnded(let record):
            records.append(record)
        case .log(let line):
            let text = EventLog(format: .text).render(.error, line.msg, line.fields, at: .now(), pid: 0)
            logs.append(String(decoding: text, as: UTF8.self))
        }
    }

    /// Moves bytes both ways until nothing moves.
    private func pumpIO() {
        var rounds = 0
        while !closed && rounds < 100_000 {
            rounds += 1
            var moved = false
            if let event = queue.first {
                queue.removeFirst()
                send(event)
                moved = true
            }
            let out = machine.clientOut
            if out.readableBytes > 0 && clientReadBudget > 0 {
                let n = min(out.readableBytes, clientReadBudget)
                clientReadBudget -= n
                out.withUnsafeReadableBytes { clientReceived.append(contentsOf: $0[..<n]) }
                out.moveReaderIndex(forwardBy: n)
                if out.readableBytes == 0 { out.clear() }
                send(.clientWrote(n))
                moved = true
            }
            if let index = current, !closed { moved = upstreamStep(index) || moved }
            // As ClientConnection.run: whatever is still lent from clientIn is copied after each write attempt.
            machine.upstreamOut.settle()
            if !moved && queue.isEmpty { break }
        }
    }

    /// One step of the fake upstream: read request bytes, answer, end.
    private func upstreamStep(_ index: Int) -> Bool {
        var conn = connections[index]
        defer { connections[index] = conn }
        var moved = false
        if machine.wantsUpstreamWrite && !conn.readFailed && !upstreamPaused {
            let out = machine.upstreamOut
            var n = out.pendingBytes
            if let limit = script.readLimit { n = min(n, max(0, limit - conn.received.count)) }
            if let window = script.window { n = min(n, max(1, window)) }
            if n > 0 {
                // Appended while no other copy holds the array, so it grows in place rather than being copied.
                var received = conn.received
                conn.received = []
                connections[index].received = []
                out.copyPrefix(n, into: &received)
                conn.received = received
                connections[index] = conn
                send(.upstreamWrote(n))
                moved = true
            } else if script.readLimit != nil {
                // The upstream stopped reading and reset: the write fails.
                conn.readFailed = true
                connections[index] = conn
                send(.upstreamWriteFailed)
                return true
            }
        }
        if closed || current != index { return moved }
        if conn.stale && !conn.ended {
            // A pooled connection the upstream had closed: the request goes out, EOF comes back.
            if conn.received.count >= max(1, script.staleAfter) {
                conn.ended = true
                connections[index] = conn
                send(.upstreamEOF)
                return true
            }
            return moved
        }
        if !conn.answered && conn.answerDueAt == nil && shouldAnswer(conn) {
            conn.answerDueAt = now + script.answerDelay
        }
        if !conn.answered, let due = conn.answerDueAt, now >= due { conn.answered = true }
        if conn.answered && conn.responseOffset < script.response.count && machine.wantsUpstreamRead {
            let input = machine.upstreamIn
            let room = input.maxCapacity - input.readableBytes
            let n = min(room, script.response.count - conn.responseOffset, max(1, script.responsePiece ?? .max))
            if n > 0 {
                _ = try? input.writeBytes(script.response[conn.responseOffset..<(conn.responseOffset + n)])
                conn.responseOffset += n
                connections[index] = conn
                send(.upstreamData)
                moved = true
            }
        }
        if closed || current != index { return moved }
        if conn.answered && conn.responseOffset == script.response.count && !conn.ended {
            switch script.then {
            case .stayOpen, .stall: break
            case .close:
                conn.ended = true
                connections[index] = conn
                send(.upstreamEOF)
                moved = true
            case .reset:
                conn.ended = true
                connections[index] = conn
                send(.upstreamReadFailed)
                moved = true
            }
        }
        return moved
    }

    private func shouldAnswer(_ conn: UpstreamConnectionLog) -> Bool {
        guard let headEnd = Self.find([13, 10, 13, 10], in: conn.received) else { return false }
        switch script.answer {
        case .never: return false
        case .atHead: return true
        case .afterBodyBytes(let n): return conn.received.count - (headEnd + 4) >= n
        case .atEnd:
            guard case .exchanging(let ex) = machine.state else { return false }
            return ex.requestComplete && machine.upstreamOut.isEmpty && ex.body?.sink.sending == nil
        }
    }

    // MARK: Invariants

    /// Each request's record as "decision status reason": what split-invariance checks compare.
    var recordSummary: [String] {
        records.map { "\($0?.decision.rawValue ?? "-") \($0?.status ?? 0) \($0?.reason ?? "-")" }
    }

    /// A description of every invariant the run broke; empty when all held.
    ///
    /// `judgingPooling: false` leaves out the pooling check, which reads the script's response as text (whether it
    /// says `Connection: close`, names a length …): right for scripted responses, wrong for arbitrary bytes (a body
    /// that contains "Connection: close"). The machine's own rule is `UpstreamReuse`, tested on its own.
    func violations(judgingPooling: Bool = true) -> [String] {
        var problems: [String] = []
        if actionAfterClose { problems.append("an action after .closeClient") }
        if !closed {
            if case .awaitingHead = machine.state {} else {
                problems.append("not closed and not awaiting a head after every deadline: \(machine.state)")
            }
        }
        // Every final status line the client got belongs to a request that ended with one record; at most one
        // request (the last, cut or aborted) ended without one.
        let finals = Self.finalStatusLines(in: clientReceived)
        if records.count < finals || records.count > finals + 1 {
            problems.append("\(records.count) request records for \(finals) final responses")
        }
        // Pooling only after a clean keep-alive exchange.
        // (The machine cannot know the upstream closes after a keep-alive response; the pool's peek does.)
        let keepAliveScript = !Self.contains(Array("onnection: close".utf8), in: script.response)
            && Self.startsWith(Array("HTTP/1.1".utf8), script.response)
            && (Self.contains(Array("Content-Length".utf8), in: script.response)
                || Self.contains(Array("chunked".utf8), in: script.response)
                || Self.contains(Array(" 204 ".utf8), in: script.response))
        if judgingPooling && released.contains(true) && !keepAliveScript {
            problems.append("a connection was pooled after a response that ends it")
        }
        // A rejected request never reaches the upstream complete (chunked bodies: no last chunk).
        if records.count == 1, let record = records[0], record.decision == .reject,
           connections.contains(where: { Self.isCompleteRequest($0.received) }) {
            problems.append("a rejected request reached the upstream with its last chunk")
        }
        return problems
    }

    /// One response in the client's stream: its head, the bytes of the head, and its payload (de-chunked), with
    /// whether the payload reached its framing's end.
    struct RelayedResponse {
        var head: HTTPResponseHead
        var headBytes: ArraySlice<UInt8>
        var payload: [UInt8]
        var ended: Bool
    }

    /// The responses in the client's stream, parsed one after the other with their framing, and the bytes after
    /// the last head that parses. A response cut short (or close-delimited) is the last one, `ended` false.
    static func relayedResponses(in bytes: [UInt8]) -> (responses: [RelayedResponse], rest: ArraySlice<UInt8>) {
        var responses: [RelayedResponse] = []
        var at = 0
        while at < bytes.count {
            var parser = HTTPResponseHeadParser()
            let rest = Array(bytes[at...])
            let parsed = rest.withUnsafeBytes { raw in
                Result { () throws(HTTPParseError) in try parser.parse(raw, requestMethod: "POST") }
            }
            guard case .success(.complete(let head, let consumed)) = parsed else { break }
            var response = RelayedResponse(head: head, headBytes: bytes[at..<(at + consumed)], payload: [], ended: true)
            at += consumed
            switch head.isInformational ? .none : head.framing {
            case .none:
                break
            case .contentLength(let n):
                // At most to the end of the stream: a declared length may be anything up to
                // `HTTPHeaders.maxContentLength` (2^63 − 1), past Int's room once added to an offset.
                let count = Int(min(n, UInt64(bytes.count - at)))
                response.payload = Array(bytes[at..<(at + count)])
                response.ended = UInt64(count) == n
                at += count
            case .closeDelimited:
                response.payload = Array(bytes[at...])
                response.ended = false
                at = bytes.count
            case .chunked:
                var decoder = ChunkedDecoder()
                var offset = 0
                var ended = false
                var payload: [UInt8] = []
                let body = Array(bytes[at...])
                body.withUnsafeBytes { raw in
                    while !ended, let event = try? decoder.decode(raw, from: &offset) {
                        switch event {
                        case .data(let span): payload.append(contentsOf: span)
                        case .end: ended = true
                        }
                    }
                }
                response.payload = payload
                response.ended = ended
                at += offset
            }
            responses.append(response)
            if !response.ended { return (responses, bytes[at...]) }
        }
        return (responses, bytes[at...])
    }

    /// The final (non-1xx) responses in the client's stream, parsed one after the other with their framing;
    /// a truncated last response still counts once its head is complete.
    static func finalStatusLines(in bytes: [UInt8]) -> Int {
        relayedResponses(in: bytes).responses.filter { !$0.head.isInformational }.count
    }

    /// The client's stream with each chunked response body replaced by its payload and, when it ended, the marker
    /// `<last chunk>`: what the client reads, whatever chunk sizes the relay chose (a close-delimited body is
    /// re-framed chunked, a chunk per piece read from the upstream). Other bodies, and the bytes after the last
    /// head that parses, are kept as they are.
    static func responsesDechunked(_ bytes: [UInt8]) -> [UInt8] {
        let (responses, rest) = relayedResponses(in: bytes)
        var out: [UInt8] = []
        for r in responses {
            out += r.headBytes
            out += r.payload
            if r.head.framing == .chunked && !r.head.isInformational && r.ended { out += Array("<last chunk>".utf8) }
        }
        return out + rest
    }

    /// Whether `bytes` hold a whole request: a head, then a chunked body up to its last chunk, or exactly the
    /// Content-Length's bytes (parsed, not guessed from a suffix: a chunk's data may end in "0\r\n\r\n").
    static func isCompleteRequest(_ bytes: [UInt8]) -> Bool {
        var parser = HTTPRequestHeadParser()
        let parsed = bytes.withUnsafeBytes { raw in Result { () throws(HTTPParseError) in try parser.parse(raw) } }
        guard case .success(.complete(let head, let consumed)) = parsed else { return false }
        switch head.framing {
        case .none, .closeDelimited: return true
        case .contentLength(let n): return UInt64(bytes.count - consumed) >= n
        case .chunked:
            var decoder = ChunkedDecoder()
            var offset = 0
            let body = Array(bytes[consumed...])
            return body.withUnsafeBytes { raw in
                while let event = try? decoder.decode(raw, from: &offset) {
                    if case .end = event { return true }
                }
                return false
            }
        }
    }

    /// A request's head followed by its de-chunked body (chunk sizes follow the reads, so tests compare this);
    /// a body that is not chunked is returned as it is.
    static func dechunked(_ bytes: [UInt8]) -> [UInt8] {
        var parser = HTTPRequestHeadParser()
        let parsed = bytes.withUnsafeBytes { raw in Result { () throws(HTTPParseError) in try parser.parse(raw) } }
        guard case .success(.complete(let head, let consumed)) = parsed, head.framing == .chunked else { return bytes }
        var out = Array(bytes[..<consumed])
        var decoder = ChunkedDecoder()
        var offset = 0
        let body = Array(bytes[consumed...])
        body.withUnsafeBytes { raw in
            while let event = try? decoder.decode(raw, from: &offset) {
                switch event {
                case .data(let span): out.append(contentsOf: span)
                case .end: return
                }
            }
        }
        return out
    }

    static func find(_ needle: [UInt8], in hay: [UInt8], from start: Int = 0) -> Int? {
        guard needle.count <= hay.count, start <= hay.count - needle.count else { return nil }
        var i = start
        while i <= hay.count - needle.count {
            if hay[i] == needle[0] && Array(hay[i..<(i + needle.count)]) == needle { return i }
            i += 1
        }
        return nil
    }

    static func contains(_ needle: [UInt8], in hay: [UInt8]) -> Bool { find(needle, in: hay) != nil }
    static func startsWith(_ prefix: [UInt8], _ bytes: [UInt8]) -> Bool { bytes.starts(with: prefix) }
    static func endsWith(_ suffix: [UInt8], _ bytes: [UInt8]) -> Bool {
        bytes.count >= suffix.count && Array(bytes.suffix(suffix.count)) == suffix
    }
}
