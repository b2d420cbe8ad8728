import Audit
import HTTP1
import Inspect
import Multipart
import Quarantine
import Reactor
import Rules

// The protocol logic of one client connection, as a value that takes events and returns actions.
//
//          events in                                         actions out
//   clientData, clientEOF, clientReset, ──►┌────────────────────┐──► connectUpstream, reconnectUpstream,
//   clientWrote(n), upstreamConnected,     │ ConnectionMachine  │    releaseUpstream(reuse:),
//   upstreamConnectFailed, upstreamData,   │  head parser       │    shutdownClientWrite, closeClient,
//   upstreamEOF, upstreamReadFailed,       │  body stages       │    requestEnded(record)/requestCounted, log
//   upstreamWriteFailed, upstreamWrote(n), │  one evaluator     │
//   timer, drain                        ──►│  deadlines, ledger │◄─► clientIn  clientOut
//                                          └────────────────────┘◄─► upstreamIn upstreamOut
//
// The machine never touches a descriptor and never reads the clock: the driver (ClientConnection and the
// UpstreamConnection attached to it) reads into `clientIn`/`upstreamIn`, writes from `clientOut`/`upstreamOut`,
// passes the time with every event and carries out the actions. Held parts and spooled bodies are local files
// (TemporaryFile), read back into `upstreamOut` as it drains.
//
// States (`State`), and the only legal transitions:
//   awaitingHead ──► exchanging     a complete head the policy accepts (the upstream is dialled, or, for a
//                                   spooled body, once the body is complete)
//   awaitingHead ──► closing        a head error, CONNECT, a verdict from the head, a header timeout
//   awaitingHead ──► closed         EOF, reset, keep-alive timeout or drain before any head byte (no record)
//   exchanging   ──► awaitingHead   response and request both ended, keep-alive on both sides
//   exchanging   ──► closing        Formwall answers (nothing of a response queued yet), or the response ended
//                                   and the connection does not carry another request
//   exchanging   ──► closed         a failure after response bytes were queued (a cut), a client reset
//   closing      ──► lingering      the answer is flushed and the client may still be sending
//   closing      ──► closed         the answer is flushed and nothing more is expected
//   lingering    ──► closed         client EOF, byte budget spent, total deadline or idle deadline
// Every request that reached `exchanging`, and every head error, ends with exactly one `.requestEnded` (or
// `.requestCounted`, without an audit log).

/// What the machine needs from the worker it runs on, injected so that tests and the fuzzer can run it alone.
protocol ExchangeContext: AnyObject {
    /// The proxy's configuration, held by reference: each connection's machine keeps it.
    var sharedConfig: SharedConfiguration { get }
    /// The policy new requests use; nil without rules.
    var policy: Policy? { get }
    /// A fresh evaluator for `policy`, nil without one.
    func newEvaluator() -> PolicyEvaluator?
    /// The quarantine store, if configured.
    var quarantine: QuarantineStore? { get }
    /// The worker is shutting down: no new request starts, no connection is kept alive.
    var draining: Bool { get }
    /// A fresh request id: random, or unique in the process when random bytes cannot be had (an id is a label,
    /// not a secret).
    func newRequestID() -> String
    /// A fresh random multipart boundary; nil when the CSPRNG fails (the request is then refused, 503).
    func newBoundary() -> [UInt8]?
    /// The wall-clock time for an audit record.
    func timestamp() -> AuditTimestamp
    /// The worker's storage kept between requests (buffers, replay logs, head arrays); nil: every request
    /// allocates its own.
    var pools: RequestPools? { get }
}

extension ExchangeContext {
    /// The proxy's configuration (read in place, through `sharedConfig`).
    var config: ProxyConfiguration {
        @inline(__always) get { sharedConfig.value }
    }
    func newEvaluator() -> PolicyEvaluator? { policy.map { PolicyEvaluator(policy: $0) } }
    var pools: RequestPools? { nil }
}

/// A configuration held by reference: a worker's connections share one.
final class SharedConfiguration: Sendable {
    let value: ProxyConfiguration

    init(_ value: ProxyConfiguration) {
        self.value = value
    }
}

/// One client connection's protocol state. See the diagram above.
struct ConnectionMachine {
    /// Something that happened on a socket, or a clock tick.
    enum Event: Equatable {
        /// New bytes in `clientIn`.
        case clientData
        /// The client's read side ended (read returned 0).
        case clientEOF
        /// The client's socket failed (reset, EPOLLERR, EPOLLHUP, a failed write).
        case clientReset
        /// The kernel accepted `n` bytes of `clientOut` (the driver consumed them).
        case clientWrote(Int)
        /// The upstream connection to server `server` (an index into the exchange's group) is ready (`reused`:
        /// taken from the pool).
        case upstreamConnected(reused: Bool, server: Int)
        /// Dialling server `server` of the exchange's group failed.
        case upstreamConnectFailed(String, server: Int)
        /// The TLS handshake with an `https://` upstream failed (verification, protocol): no request byte went up.
        case upstreamTLSFailed(String)
        /// The antivirus verdict for scan `id`.
        case scanResult(FormStage.ScanVerdict, id: Int)
        /// The driver is dialling server `server` of the exchange's group (sent before the connect's outcome, so a
        /// connect timeout names the server).
        case upstreamChosen(server: Int)
        /// New bytes in `upstreamIn`.
        case upstreamData
        /// The upstream's sending side ended (read returned 0).
        case upstreamEOF
        /// Reading from the upstream failed (after every byte queued before the error was read).
        case upstreamReadFailed
        /// Writing to the upstream failed; reading goes on, so an early answer is still relayed.
        case upstreamWriteFailed
        /// The kernel accepted the first `n` bytes of `upstreamOut`; the machine consumes them.
        case upstreamWrote(Int)
        /// The driver's periodic tick: deadlines are checked against `now`.
        case timer
        /// The worker drains: an idle connection closes now, a busy one after its response.
        case drain
    }

    /// What the driver must do.
    enum Action {
        /// Take a pooled connection to a server of upstream group `group` (an index into `upstreams`), chosen
        /// by the group's balancer, or dial one; answer with `.upstreamConnected` or `.upstreamConnectFailed`.
        case connectUpstream(group: Int)
        /// Drop the current upstream connection and dial a fresh one to the same server (a replay); answer as
        /// for `connectUpstream`.
        case reconnectUpstream(group: Int)
        /// Dialling failed before any byte went upstream: drop the attempt and try the next server of the group
        /// that this request has not tried; answer as for `connectUpstream`.
        case retryUpstream(group: Int)
        /// Stream this held file part to the antivirus (clamd INSTREAM) as it grows; answer with `.scanResult`.
        case scanFile(TemporaryFile, id: Int)
        /// The file of scan `id` is complete: end the stream and wait for the verdict.
        case scanInputEnded(id: Int)
        /// What this exchange learnt about a server's health (passive health checks): no `failure` once its
        /// response head arrived; a `failure` when connecting failed or timed out, or it closed, answered garbage
        /// or fell silent before answering.
        case upstreamHealth(group: Int, server: Int, failure: UpstreamFailure?)
        /// Detach the upstream connection: back to the pool, or closed. Once per upstream connection used.
        case releaseUpstream(reuse: Bool)
        /// Send FIN to the client (lingering starts).
        case shutdownClientWrite
        /// Close the client connection. No event is handled after it.
        case closeClient
        /// Close the client connection with a reset once what is queued for it is written: a response was cut
        /// in a framing where a FIN would read as its end (close-delimited). No event is handled after it.
        case resetClient
        /// A request ended without an audit record (no audit log configured): count it.
        case requestCounted
        /// A request ended: count it, and write its audit record. Indirect (boxed), like `log`: the record is
        /// large, and every connection keeps an action array. (Without an audit log, `requestCounted` ends a
        /// request with no box to allocate.)
        indirect case requestEnded(AuditRecord)

        /// `requestEnded` with the record, or `requestCounted` without one.
        static func ended(_ record: AuditRecord?) -> Action {
            guard let record else { return .requestCounted }
            return .requestEnded(record)
        }
        /// A failure the operator must hear of (upstream, spool, staging, quarantine): one line for stderr, which
        /// the driver rate-limits per `kind`. The client's answer carries only a generic detail.
        indirect case log(FailureLine)
    }

    /// An error line about one request, for the driver's rate-limited stderr log (docs/operations.md).
    struct FailureLine {
        /// The rate-limiting bucket: `upstream`, `spool`, `quarantine`, `antivirus` or `random`.
        var kind: String
        /// The stable event text (`upstream unreachable`, …).
        var msg: StaticString
        /// The request the failure ended.
        var requestID: String
        /// The cause (errno text, paths), for the operator only.
        var error: String?
        /// The upstream origin, for `upstream` failures.
        var upstream: String?

        /// The line's fields after `kind`: request id, upstream, error.
        var fields: [LogField] {
            var fields: [LogField] = [.string("kind", kind), .requestID(requestID)]
            if let upstream { fields.append(.string("upstream", upstream)) }
            if let error { fields.append(.string("error", error)) }
            return fields
        }
    }

    enum State {
        /// Between requests (`since` nil), or a head partly read since `since`.
        case awaitingHead(since: UInt64?)
        /// A request in progress; the upstream may still be connecting.
        case exchanging(Exchange)
        /// Flushing an answer (Formwall's own, or a response after which the connection closes). With
        /// `discard`, what the client still sends is read and dropped.
        case closing(discard: Bool)
        /// The answer is flushed and FIN sent; reading and dropping until EOF or a limit.
        case lingering(until: UInt64, idleUntil: UInt64)
        /// Terminal: events produce no action.
        case closed
    }

    let context: ExchangeContext
    /// The configuration, by reference. Inline it made the machine a 1 KiB struct, and each call from the
    /// connection to one of the machine's non-mutating members (`wantsUpstreamWrite`...) copied all of it
    /// onto the stack first, a dozen times per request.
    private let shared: SharedConfiguration
    /// The proxy's configuration, through `shared` (inlined, the optimiser reads just the field asked for).
    var config: ProxyConfiguration {
        @inline(__always) get { shared.value }
    }
    /// The context's pools (read once: every request takes and gives back through them).
    private let pools: RequestPools?
    /// `host:port` of the client, for the audit log.
    /// (With `--proxy-protocol`, the source the PROXY header names.)
    private(set) var peer: String
    /// The client's address alone, for forwarding headers and quarantine records.
    private(set) var peerIP: String
    /// `--proxy-protocol`: the connection's PROXY header has not been read yet.
    private var awaitingProxyHeader: Bool
    /// Bytes from the client, not yet consumed.
    let clientIn: ByteBuffer
    /// Bytes for the client, not yet written.
    let clientOut: ByteBuffer
    /// Bytes from the upstream, not yet consumed.
    let upstreamIn: ByteBuffer
    /// Bytes for the upstream, not yet accepted by the kernel: owned bytes, and part data lent from `clientIn`
    /// while a body slice is processed. The driver settles it after each write attempt, before reading again.
    let upstreamOut: OutputQueue

    private(set) var state: State = .awaitingHead(since: nil) {
        didSet { stateChanges &+= 1 }
    }
    /// Counts assignments to `state`: a loop holding the exchange checks that the state still holds it by
    /// comparing counts, not by binding the exchange out of the state again (each binding retains and releases).
    private var stateChanges: UInt32 = 0
    private var headParser: HTTPRequestHeadParser
    private var clientEOF = false
    private(set) var now: UInt64
    /// The last time client bytes arrived (body idle timeout, keep-alive timeout).
    private var lastActivity: UInt64
    /// The last tick at which a request body was held up by the upstream (reading paused by backpressure): the
    /// client body timeout counts the client's silence only from here, while Formwall wants to read.
    private var heldUpAt: UInt64 = 0
    /// The last tick at which a response was held up by the client (reading the upstream paused by
    /// backpressure): the upstream response timeout counts the upstream's silence only from here.
    private var responseHeldUpAt: UInt64 = 0
    /// Whether the body, and the response, were held up at the previous tick. The hold ended at some moment since,
    /// which the tick does not see: its time counts as held up too, so a timeout never runs from before the end
    /// of a hold (with a 1 s body timeout, a client whose bytes the upstream had just let through was cut).
    private var bodyWasHeldUp = false
    private var responseWasHeldUp = false
    /// Since when bytes for the client have waited in `clientOut` without the client taking any (the last write
    /// that made progress, or the tick that first saw them waiting); 0 while `clientOut` is empty.
    private var clientWaitingSince: UInt64 = 0
    private var lastTick: UInt64
    /// The response was cut where the client cannot see a cut (close-delimited): the connection ends with a reset.
    private var resetWhenClosing = false
    /// Bytes still allowed to be discarded while answering and lingering; nil until discarding starts.
    private var lingerBudget: Int?
    /// The storage of an earlier exchange's `replayBorrowed`, emptied, for the next (one allocation per
    /// connection rather than per request).
    private var spareBorrowed: [OutputQueue.Borrowed] = []

    /// Creates the machine for a connection accepted at `now`.
    /// What a TLS handshake established about this connection; nil for a plain one.
    struct SecureFacts: Equatable {
        var version: String
        var cipher: String
        /// The server name the client asked for (SNI), if any.
        var serverName: String?
        /// The verified client certificate's subject (RFC 2253), with `--tls-client-ca`.
        var clientSubject: String?
    }
    private(set) var secureFacts: SecureFacts?

    /// The driver finished the TLS handshake: requests on this connection are `https`.
    mutating func secure(_ facts: SecureFacts) { secureFacts = facts }

    init(context: ExchangeContext, peer: String, now: UInt64) {
        self.context = context
        let shared = context.sharedConfig
        self.shared = shared
        let config = shared.value
        pools = context.pools
        self.peer = peer
        peerIP = Self.address(of: peer)
        awaitingProxyHeader = config.proxyProtocol
        // Only the client's input starts with room (for a request head); the others grow when first used, so an
        // idle keep-alive connection holds one small buffer, not four.
        // Allocated by the first read (see ClientConnection.readClient): an idle connection holds no input buffer.
        let pool = pools?.storage
        clientIn = ByteBuffer(initialCapacity: 0, maxCapacity: config.buffers.clientRead, pool: pool)
        clientOut = ByteBuffer(initialCapacity: 0, maxCapacity: config.buffers.outputCap, pool: pool)
        upstreamIn = ByteBuffer(initialCapacity: 0, maxCapacity: max(config.buffers.upstreamRead, 16 * 1024), pool: pool)
        upstreamOut = OutputQueue(maxCapacity: config.buffers.outputCap, pool: pool)
        headParser = HTTPRequestHeadParser(limits: config.http)
        self.now = now
        lastActivity = now
        lastTick = now
    }

    // MARK: - What the driver asks

    /// Whether the driver should read from the client now (a level, reconciled after each batch). The driver's
    /// questions are inlined: a call would pass the machine by address, and the driver, a class holding it, would
    /// first copy the whole machine onto the stack.
    @inline(__always)
    var wantsClientRead: Bool {
        switch state {
        case .closed: return false
        case .lingering: return !clientEOF
        case .closing(let discard): return discard && !clientEOF
        case .awaitingHead: return !clientEOF && clientIn.readableBytes < clientIn.maxCapacity
        case .exchanging(let ex):
            if ex.bodyDiscarded { return !clientEOF }
            guard !clientEOF, clientIn.readableBytes < clientIn.maxCapacity else { return false }
            // Reading ahead while a response is awaited is allowed: pipelined requests wait in clientIn.
            if ex.requestComplete || ex.spooling { return true }
            return upstreamOut.pendingBytes < config.buffers.outputHighWater
        }
    }

    /// Whether the driver should read from the upstream now.
    @inline(__always)
    var wantsUpstreamRead: Bool {
        guard case .exchanging(let ex) = state, ex.upstreamConnected, !ex.upReadEnded else { return false }
        return clientOut.readableBytes < config.buffers.outputHighWater
            && upstreamIn.readableBytes < upstreamIn.maxCapacity
    }

    /// Whether the driver should write `upstreamOut` now.
    @inline(__always)
    var wantsUpstreamWrite: Bool {
        guard case .exchanging(let ex) = state, ex.upstreamConnected, !ex.upWriteFailed else { return false }
        return !upstreamOut.isEmpty
    }

    @inline(__always)
    var isClosed: Bool { if case .closed = state { return true } else { return false } }

    /// Idle between requests with nothing to write (drain closes such a connection at once).
    @inline(__always)
    var isIdle: Bool {
        if case .awaitingHead(since: nil) = state { return clientOut.readableBytes == 0 }
        return false
    }

    /// Since when the connection has been idle (`isIdle`), for the worker's connection limit; nil when busy.
    var idleSince: UInt64? { isIdle ? lastActivity : nil }

    // MARK: - Events

    /// Handles one event at time `now`; the actions to carry out are appended to `out` in order.
    mutating func handle(_ event: Event, now: UInt64, into out: inout [Action]) {
        guard !isClosed else { return }
        self.now = now
        switch event {
        case .clientData:
            lastActivity = now
            switch state {
            case .closing(discard: true), .lingering:
                discardClientInput(into: &out)
                return
            case .closing(discard: false):
                clientIn.clear()
            case .awaitingHead(since: nil) where clientIn.readableBytes > 0:
                state = .awaitingHead(since: now)
            case .exchanging(let ex) where ex.bodyDiscarded:
                discardClientInput(into: &out)
                if isClosed { return }
            default:
                break
            }
        case .clientEOF:
            clientEOF = true
            switch state {
            case .lingering:
                close(into: &out)
                return
            case .closing where clientOut.readableBytes == 0:
                close(into: &out)
                return
            default:
                break
            }
        case .clientReset:
            peerGone("client_reset", into: &out)
            return
        case .clientWrote:
            clientWaitingSince = clientOut.readableBytes == 0 ? 0 : now
            if case .closing = state, clientOut.readableBytes == 0 {
                finishClosing(into: &out)
                return
            }
            if clientOut.readableBytes == 0 {
                // Between requests, the keep-alive timeout and the idle order start once the response is out.
                if case .awaitingHead(since: nil) = state { lastActivity = now }
                releaseIdleBuffers()
            }
        case .upstreamConnected(let reused, let server):
            guard case .exchanging(let ex) = state, ex.upstream == .connecting else { break }
            ex.upstream = .connected
            ex.server = server
            ex.reused = reused
            ex.replayLog = reused ? (pools?.replayLogs.take() ?? []) : nil
            ex.dropBorrowedReplay()
            if reused && ex.replayBorrowed.capacity == 0 { swap(&ex.replayBorrowed, &spareBorrowed) }
            if ex.upstreamStartedAt == nil { ex.upstreamStartedAt = now }
            ex.upstreamConnectedAt = now
        case .upstreamTLSFailed(let why):
            guard case .exchanging(let ex) = state, ex.upstream == .connected, !ex.responseStarted else { break }
            out.append(.log(FailureLine(kind: "upstream", msg: "upstream tls failed", requestID: ex.requestID,
                                        error: why, upstream: serverName(ex))))
            let failure = UpstreamFailure("upstream_tls_failed", error: why)
            if ex.upstreamAccepted == 0 {
                // Nothing of the request went up: the next server of the group may take it.
                if retryNextServer(ex, failure, into: &out) {
                    upstreamIn.clear()
                    ex.upstreamRead = .open
                    ex.upWriteFailed = false
                    break
                }
            } else {
                reportHealth(ex, failure, into: &out)
            }
            abort(status: 502, kind: "upstream_tls_failed", into: &out)
            return
        case .scanResult(let verdict, let id):
            guard case .exchanging(let ex) = state, let form = ex.form else { break }
            form.scanFinished(verdict, id: id)
        case .upstreamChosen(let server):
            if case .exchanging(let ex) = state, ex.upstream == .connecting { ex.server = server }
        case .upstreamConnectFailed(let why, let server):
            guard case .exchanging(let ex) = state, ex.upstream == .connecting else { break }
            ex.server = server
            out.append(.log(FailureLine(kind: "upstream", msg: "upstream unreachable", requestID: ex.requestID,
                                        error: why, upstream: serverName(ex))))
            if retryNextServer(ex, UpstreamFailure("upstream_unreachable", error: why), into: &out) { break }
            ex.upstream = .none
            abort(status: 502, kind: "upstream_unreachable", into: &out)
            return
        case .upstreamData:
            if case .exchanging(let ex) = state, upstreamIn.readableBytes > 0 {
                ex.upReceived = true
                ex.upstreamActivity = now
            }
        case .upstreamEOF:
            if case .exchanging(let ex) = state { ex.upstreamRead = .ended }
        case .upstreamReadFailed:
            if case .exchanging(let ex) = state { ex.upstreamRead = .failed }
        case .upstreamWriteFailed:
            if case .exchanging(let ex) = state { ex.upWriteFailed = true }
        case .upstreamWrote(let n):
            upstreamWrote(n)
        case .timer:
            tick(into: &out)
            if isClosed { return }
        case .drain:
            if isIdle {
                close(into: &out)
                return
            }
        }
        pump(into: &out)
    }

    // MARK: - The pump

    /// Advances whatever can advance.
    private mutating func pump(into out: inout [Action]) {
        var progressed = true
        while progressed && !isClosed {
            progressed = false
            switch state {
            case .exchanging(let ex):
                let holding = stateChanges
                refillFromFile(ex)
                if !ex.requestComplete && !ex.bodyDiscarded && (ex.upstream != .none || ex.spooling) {
                    progressed = pumpBody(ex, into: &out) || progressed
                }
                guard stateChanges == holding else { progressed = true; continue }
                if ex.bodyDiscarded && clientIn.readableBytes > 0 {
                    discardClientInput(into: &out)
                    guard stateChanges == holding else { continue }
                }
                if !ex.requestComplete, !ex.bodyDiscarded, clientEOF, clientIn.readableBytes == 0 {
                    // The client went away mid-upload: the upstream must see an incomplete body.
                    abort(status: nil, kind: "client_aborted", into: &out)
                    return
                }
                if ex.upstreamConnected { progressed = pumpResponse(ex, into: &out) || progressed }
            case .awaitingHead:
                progressed = parseHead(into: &out)
            case .closing, .lingering, .closed:
                break
            }
        }
        if case .awaitingHead = state, clientEOF, clientOut.readableBytes == 0 {
            close(into: &out)
        }
    }

    private mutating func parseHead(into out: inout [Action]) -> Bool {
        guard clientIn.readableBytes > 0, !context.draining else { return false }
        if awaitingProxyHeader {
            let result = clientIn.withUnsafeReadableBytes {
                ProxyProtocol.parse(Array($0.prefix(16 + ProxyProtocol.maxV2Length)))
            }
            switch result {
            case .needMore:
                return false
            case .invalid(let why):
                respond(status: 400, kind: "invalid_proxy_header", requestID: context.newRequestID(), detail: why,
                        violation: nil, exchange: nil, into: &out)
                return false
            case .complete(let consumed, let source):
                clientIn.moveReaderIndex(forwardBy: consumed)
                awaitingProxyHeader = false
                if let source {
                    peer = source
                    peerIP = Self.address(of: source)
                }
                return true
            }
        }
        if headParser.needsStorage { headParser.adoptStorage(pools?.fieldStorage.take() ?? HTTPHeaders.Storage()) }
        let result = clientIn.withUnsafeReadableBytes { bytes in
            Result { () throws(HTTPParseError) in try headParser.parse(bytes) }
        }
        switch result {
        case .failure(let error):
            respond(status: error.status, kind: error.kind, requestID: context.newRequestID(), detail: nil,
                    violation: nil, exchange: nil, into: &out)
            return false
        case .success(.needMore(let consumed)):
            clientIn.moveReaderIndex(forwardBy: consumed)
            return false
        case .success(.complete(let head, let consumed)):
            clientIn.moveReaderIndex(forwardBy: consumed)
            beginExchange(consume head, into: &out)
            return true
        }
    }

    private func newRequestID(given: String?) -> String {
        if let given, RequestID.isValid(given) { return given }
        return context.newRequestID()
    }

    // MARK: - Starting an exchange

    /// `head` is consumed: the parser's head becomes this function's to edit, and only the exchange's copy is made.
    private mutating func beginExchange(_ head: consuming HTTPRequestHead, into out: inout [Action]) {
        let requestID = newRequestID(given: head.header(.xRequestID))
        let ex = Exchange(head: copy head, requestID: requestID, startedAt: now, limits: config.http)
        state = .exchanging(ex)
        let holding = stateChanges
        // `--trusted-proxies`: who the client is (audit, quarantine), and whether its X-Forwarded-For is kept.
        let resolution = config.trustedProxies.resolve(peer: peerIP,
                                                       forwardedFor: head.headers.values(.xForwardedFor))
        if resolution.client != peerIP { ex.forwardedClient = resolution.client }
        if head.method == "CONNECT" {
            respond(status: 405, kind: "method_not_allowed", requestID: requestID, detail: nil, violation: nil,
                    exchange: ex, into: &out)
            return
        }
        // Formwall is no tunnel: a protocol switch (WebSocket) is refused rather than silently downgraded to a
        // plain request. `h2c` alone is dropped like any hop-by-hop field (RFC 9110 §7.8 lets a server ignore it).
        if let refused = Self.refusedUpgrade(head) {
            respond(status: 501, kind: "upgrade_not_supported", requestID: requestID, detail: "Upgrade: \(refused)",
                    violation: nil, exchange: ex, into: &out)
            return
        }

        // The policy decides first, from the head alone: 405, 400 (require-header), 415 and 413 (Content-Length) are answered
        // before a body byte is read, and before any 100 Continue.
        var fresh = context.newEvaluator()
        let hasPolicy = fresh != nil
        var bodyKind: PolicyEvaluator.BodyKind?
        // The Content-Type is read as bytes where it lies: a String is made only for a policy (`begin` takes one).
        // Fields removed below (a modified-header, Content-Encoding) are never Content-Type, but they move it:
        // its index is looked up again where the boundary is parsed.
        let contentTypeIndex = head.headers.firstIndex(.contentType)
        let contentType = hasPolicy ? contentTypeIndex.map { head.headers.value(at: $0) } : nil
        let looksMultipart = contentTypeIndex.map {
            head.headers.withValue(at: $0) { ASCII.hasPrefix($0, lowercase: "multipart/form-data") }
        } ?? false
        // The route's facts used below and later, read once from the evaluator after `begin`. The evaluator is then
        // moved (never copied: a copy retains every reference it holds, and a second holder would make the stage's
        // first update copy the request's state) into the exchange, where a refused request's audit record reads
        // it, and from there into the stage that judges the body (`Exchange.takeEvaluator`).
        var modifiedHeader: String?
        var ratioMax = 100
        var ratioRule: SourceLocation?
        var routeUpstreamBody: UpstreamBodyMode?
        var routePrefix: String?
        if var ev = fresh.take() {
            let length: UInt64? = {
                switch head.framing {
                case .none: return 0
                case .contentLength(let n): return n
                case .chunked, .closeDelimited: return nil
                }
            }()
            let decision = ev.begin(method: head.method, path: head.target, host: head.header(.host),
                                    contentType: contentType, contentLength: length,
                                    preflight: Self.isPreflight(head),
                                    methodOverrides: head.headers.methodOverrides,
                                    headerValues: { head.headers.values(named: $0) })
            modifiedHeader = ev.routeModifiedHeader
            ratioMax = ev.routeCompressionRatioMax ?? 100
            routeUpstreamBody = ev.routeUpstreamBody
            routePrefix = ev.routePrefix
            let upstreamName = ev.routeUpstreamName
            ex.putEvaluator(consume ev)
            switch decision {
            case .reject(let violation):
                respond(violation: violation, exchange: ex, into: &out)
                return
            case .proceed(let kind):
                bodyKind = kind
            }
            // The route's upstream group. Start-up and reload refuse a policy naming an undeclared group, so a
            // miss here is Formwall's own fault: 500, never a silent fall-back to another application.
            if let name = upstreamName {
                guard let group = config.upstreamGroup(named: name) else {
                    respond(status: 500, kind: "internal_error", requestID: requestID,
                            detail: "upstream group \(name) is not declared", violation: nil, exchange: ex, into: &out)
                    return
                }
                ex.group = group
            }
        }
        ex.modifiedHeader = modifiedHeader

        // The field that tells the upstream what was stripped is Formwall's alone: the client's copy never passes.
        if let name = modifiedHeader { head.headers.removeAll(named: name) }

        // Multipart bodies are decoded, checked and re-encoded canonically; everything else streams through.
        // The route's `upstream-body` setting wins over the global option.
        let bodyMode = routeUpstreamBody ?? config.upstreamBody
        var transform = RequestBodyStage.Transform.passthrough
        var upstreamFraming = head.framing
        // A re-encoded body's Content-Type, written in place of the client's (HTTPForwardingContext.contentType).
        var upstreamContentType: HTTPForwardingContext.ContentType?
        var isMultipart = bodyKind == .multipart || (bodyKind == nil && looksMultipart)
        // A compressed form body is decoded before it is parsed, and goes upstream decoded (docs/rules.md,
        // "Compressed bodies"); other bodies keep their Content-Encoding and stream through.
        var decoders: [StreamInflater] = []
        if isMultipart || (bodyKind == .urlencoded && hasPolicy) {
            switch contentDecoding(head, route: ex.evaluator?.route) {
            case .identity:
                break
            case .decode(let layers):
                decoders = layers
                // Read only for a body that is decoded: the location's file name is one string for every worker,
                // and each reference to it is a count they all write (bench/proxy/sharing.py).
                ratioRule = ex.evaluator?.routeLocation
                head.headers.removeAll(named: "content-encoding")
            case .passUninspected:
                ex.encodingUninspected = true
                isMultipart = false
                bodyKind = nil
            case .refuse(let violation):
                respond(violation: violation, exchange: ex, into: &out)
                return
            }
        }
        if isMultipart, let contentTypeIndex = head.headers.firstIndex(.contentType) {
            let parsed: MultipartBoundary.Parsed
            do {
                parsed = try head.headers.withValue(at: contentTypeIndex) { bytes in
                    Result { () throws(MultipartError) in try MultipartBoundary.parse(contentType: bytes, limits: config.multipart) }
                }.get()
            } catch {
                if var ev = ex.takeEvaluator() {
                    _ = ev.malformed(detail: error.kind.rawValue)
                    ex.putEvaluator(consume ev)
                }
                respond(status: 400, kind: "malformed_body", requestID: requestID, detail: error.kind.rawValue,
                        violation: nil, exchange: ex, into: &out)
                return
            }
            let quarantine = context.quarantine.map {
                QuarantineContext(store: $0, requestID: requestID, route: routePrefix,
                                  client: ex.forwardedClient ?? peerIP)
            }
            // A predictable boundary would let a part's data close the re-encoded body early: without random
            // bytes, this request is refused, not the process stopped.
            guard let reencodeBoundary = context.newBoundary() else {
                out.append(.log(FailureLine(kind: "random", msg: "random bytes unavailable", requestID: requestID,
                                            error: "RAND_bytes failed")))
                respond(status: 503, kind: "random_unavailable", requestID: requestID, detail: nil, violation: nil,
                        exchange: ex, into: &out)
                return
            }
            let stage = FormStage(boundary: parsed.boundary, limits: config.multipart, anomalies: parsed.anomalies,
                                  reencodeBoundary: reencodeBoundary, evaluator: ex.takeEvaluator(),
                                  quarantine: quarantine, spoolDirectory: config.spoolDirectory,
                                  holdPending: bodyMode == .hold, observe: config.audit != nil,
                                  hashing: config.audit != nil ? .files : .none,
                                  previewFields: config.audit?.fields ?? [], scanFiles: config.antivirus != nil,
                                  allowScanFailure: config.antivirus?.allowOnFailure ?? false,
                                  records: pools?.partRecords.take() ?? [], partState: pools?.takePartState())
            guard let encoder = stage.encoder else {
                // Unreachable: a stage built with a re-encode boundary always has an encoder.
                respond(status: 500, kind: "internal_error", requestID: requestID, detail: "no encoder",
                        violation: nil, exchange: ex, into: &out)
                return
            }
            ex.form = stage
            transform = .form(stage)
            upstreamContentType = .multipart(boundary: encoder.boundary)
            upstreamFraming = bodyMode == .spool ? .contentLength(0) : .chunked
        } else if isMultipart {
            respond(status: 400, kind: "malformed_body", requestID: requestID, detail: "missing_boundary",
                    violation: nil, exchange: ex, into: &out)
            return
        } else if bodyKind == .urlencoded, hasPolicy, let moved = ex.takeEvaluator() {
            // `reencode off`: judged as usual, forwarded byte for byte under the client's own Content-Type.
            let verbatim = moved.routeReencode == .off
            let stage = UrlencodedStage(evaluator: moved, verbatim: verbatim)
            ex.urlencoded = stage
            transform = .urlencoded(stage)
            if !verbatim {
                upstreamContentType = .value("application/x-www-form-urlencoded")
            }
            upstreamFraming = bodyMode == .spool ? .contentLength(0) : .chunked
        }

        var sinkKind: UpstreamSink.Kind
        switch upstreamFraming {
        case .chunked: sinkKind = .chunked
        case .none, .closeDelimited, .contentLength: sinkKind = .raw
        }
        ex.spooling = bodyMode == .spool && (ex.form != nil || ex.urlencoded != nil)
        if ex.spooling {
            do { sinkKind = .spool(try TemporaryFile(directory: config.spoolDirectory)) } catch {
                out.append(.log(FailureLine(kind: "spool", msg: "spool failed", requestID: requestID,
                                            error: "\(error)")))
                respond(status: 500, kind: "spool_unavailable", requestID: requestID, detail: nil, violation: nil,
                        exchange: ex, into: &out)
                return
            }
        }
        var forwarding = HTTPForwardingContext(clientAddress: peerIP, scheme: secureFacts == nil ? "http" : "https",
                                               requestID: requestID)
        forwarding.keepForwardedFor = resolution.keepChain
        forwarding.dropsUnderscoredFields = config.underscoreHeaders == .drop
        forwarding.contentType = upstreamContentType
        // The client-certificate field is Formwall's alone: a client's copy never passes, on any listener.
        if let name = config.tls?.clientSubjectHeader {
            head.headers.removeAll(named: name)
            if let subject = secureFacts?.clientSubject {
                forwarding.added.append(HTTPHeaderField(name: name, value: Self.fieldSafe(subject)))
            }
        }
        // A re-encoded chunked body tells the upstream what was stripped in a trailer field (its head left before
        // the parts were judged), announced by `Trailer`; a spooled body does it in its head.
        let trailerName: String? = {
            guard case .chunked = sinkKind, ex.form != nil || ex.urlencoded != nil else { return nil }
            return modifiedHeader
        }()
        if let trailerName {
            head.headers.removeAll(named: "trailer")
            forwarding.added.append(HTTPHeaderField(name: "Trailer", value: trailerName))
        }
        if ex.spooling {
            // Written once the body is complete and its length known; the upstream is dialled only then, so a
            // rejected spooled request never opens an upstream connection.
            ex.pendingHead = (head, forwarding)
        } else {
            let queued = HTTPHeadSerializer.withRequestHead(head, framing: upstreamFraming, context: forwarding) {
                (try? upstreamOut.write($0)) != nil
            }
            if !queued {
                respond(status: 500, kind: "internal_buffer", requestID: requestID, detail: nil, violation: nil,
                        exchange: ex, into: &out)
                return
            }
            dialUpstream(ex, into: &out)
        }
        let sink = UpstreamSink(kind: sinkKind, buffer: upstreamOut)
        if let trailerName {
            sink.trailer = { [form = ex.form, urlencoded = ex.urlencoded] in
                Self.modifiedValue(form?.records ?? urlencoded?.records ?? []).map { Array("\(trailerName): \($0)\r\n".utf8) }
            }
        }
        let body = RequestBodyStage(framing: head.framing, limits: config.http, transform: transform, sink: sink,
                                    decoders: decoders, ratioMax: ratioMax, ratioRule: ratioRule,
                                    highWater: config.buffers.outputHighWater)
        // One stage holds the evaluator from here on (the audit record reads it there): the form or urlencoded
        // stage, else the body stage.
        if ex.form == nil && ex.urlencoded == nil { body.evaluator = ex.takeEvaluator() }
        ex.body = body
        do {
            try body.start()
        } catch {
            fail(body: error, into: &out)
            return
        }
        if ex.requestComplete { requestDidComplete(ex, into: &out) }
        guard stateChanges == holding else { return }
        if head.expectsContinue && !ex.requestComplete {
            // Formwall has accepted the request: tell the client to send the body.
            _ = try? clientOut.writeBytes(Self.continueResponse)
        }
    }

    /// The protocols of an `Upgrade` field Formwall refuses (all but `h2c`), as sent; nil when there are none.
    static func refusedUpgrade(_ head: HTTPRequestHead) -> String? {
        let values = head.headers.values(.upgrade)
        guard !values.isEmpty else { return nil }
        let protocols = values.joined(separator: ",").split(separator: ",")
            .map { String($0.filter { !$0.isWhitespace }) }.filter { !$0.isEmpty }
        guard protocols.contains(where: { $0.lowercased() != "h2c" }) else { return nil }
        return protocols.joined(separator: ", ")
    }

    /// A CORS preflight: `OPTIONS` with `Origin` and `Access-Control-Request-Method`, and no body.
    static func isPreflight(_ head: HTTPRequestHead) -> Bool {
        guard head.method == "OPTIONS", head.header(named: "origin") != nil,
              head.header(named: "access-control-request-method") != nil else { return false }
        switch head.framing {
        case .none, .contentLength(0): return true
        default: return false
        }
    }

    /// `stripped=a,b; quarantined=c` from a form's part records; nil when nothing was stripped or quarantined.
    /// Names are percent-encoded outside `A-Z a-z 0-9 - . _ ~`; an unnamed part is listed as an empty name.
    static func modifiedValue(_ records: [PartRecord]) -> String? {
        // Nearly every request strips nothing: answered before any list is built.
        guard records.contains(where: { $0.action == "strip" || $0.action == "quarantine" }) else { return nil }
        var groups: [(String, [String])] = [("stripped", []), ("quarantined", [])]
        for record in records {
            let group = record.action == "strip" ? 0 : record.action == "quarantine" ? 1 : nil
            guard let group else { continue }
            let name = percentEncoded(record.part.nameString ?? "")
            if !groups[group].1.contains(name) { groups[group].1.append(name) }
        }
        let listed = groups.filter { !$0.1.isEmpty }.map { "\($0.0)=\($0.1.joined(separator: ","))" }
        return listed.isEmpty ? nil : listed.joined(separator: "; ")
    }

    private static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(hex[Int(byte >> 4)])
                out.unicodeScalars.append(hex[Int(byte & 15)])
            }
        }
        return out
    }

    private static let continueResponse = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    // MARK: - Request body

    /// Moves client body bytes through the body stage into `upstreamOut`; true if anything moved.
    private mutating func pumpBody(_ ex: Exchange, into out: inout [Action]) -> Bool {
        guard let body = ex.body else { return false }
        if ex.upWriteFailed && !canReplay(ex) {
            // The upstream stopped reading: nothing more goes up; the rest of the body is discarded.
            ex.bodyDiscarded = true
            ex.bodyDiscardedAt = now
            startDiscarding()
            return true
        }
        var moved = false
        pumping: while !body.isComplete, clientIn.readableBytes > 0 || (body.isBlocked && !body.sink.isReplaying),
              ex.spooling || upstreamOut.pendingBytes < config.buffers.outputHighWater {
            let wasBlocked = body.isBlocked
            let slice = min(clientIn.readableBytes, 64 * 1024)
            let result = clientIn.withUnsafeReadableBytes { bytes in
                let input = UnsafeRawBufferPointer(rebasing: bytes[0..<slice])
                // Part data the stage passes on from this slice is lent to upstreamOut, not copied.
                upstreamOut.lendable = input
                defer { upstreamOut.lendable = nil }
                return Result { () throws(RequestBodyError) in try body.process(input) }
            }
            switch result {
            case .failure(let error):
                fail(body: error, into: &out)
                return true
            case .success(let n):
                if let failure = body.sink.failure {
                    log(kind: "spool", "spool write failed", error: "\(failure)", into: &out)
                    abort(status: 500, kind: "body_sink_failed", into: &out)
                    return true
                }
                if n == 0 && !body.isComplete {
                    if wasBlocked && !body.isBlocked {
                        moved = true
                        continue
                    }
                    if body.sink.isReplaying { refillFromFile(ex) }
                    // Blocked (a replay, an antivirus verdict): nothing more until the next event.
                    break pumping
                }
                clientIn.moveReaderIndex(forwardBy: n)
                moved = moved || n > 0
            }
        }
        if let (file, id) = ex.form?.takeScanRequest() { out.append(.scanFile(file, id: id)) }
        if let id = ex.form?.takeScanEnd() { out.append(.scanInputEnded(id: id)) }
        if body.isComplete && ex.requestCompletedAt == nil { requestDidComplete(ex, into: &out) }
        return moved
    }

    private mutating func requestDidComplete(_ ex: Exchange, into out: inout [Action]) {
        ex.requestCompletedAt = now
        guard let body = ex.body else { return }
        if case .spool(let file) = body.sink.kind, case (let head, var forwarding)? = ex.pendingHead {
            ex.pendingHead = nil
            if let name = ex.modifiedHeader,
               let value = Self.modifiedValue(ex.form?.records ?? ex.urlencoded?.records ?? []) {
                forwarding.added.append(HTTPHeaderField(name: name, value: value))
            }
            let queued = HTTPHeadSerializer.withRequestHead(head, framing: .contentLength(file.size),
                                                            context: forwarding) { (try? upstreamOut.write($0)) != nil }
            guard queued else {
                abort(status: 500, kind: "internal_buffer", into: &out)
                return
            }
            body.sink.sending = (file, 0)
            refillFromFile(ex)
            if ex.upstream == .none {
                dialUpstream(ex, into: &out)
            }
        }
    }

    /// Streams a held part or the spooled body from its file into `upstreamOut` while there is room.
    /// Inlined for its first check, which nearly every call fails (nothing is sent from a file), and the rest
    /// static: a call to a method of the machine from `pump` would first copy the whole machine onto the stack.
    @inline(__always)
    private func refillFromFile(_ ex: Exchange) {
        guard let sink = ex.body?.sink, sink.sending != nil else { return }
        Self.refill(upstreamOut, from: sink, highWater: config.buffers.outputHighWater)
    }

    private static func refill(_ upstreamOut: OutputQueue, from sink: UpstreamSink, highWater: Int) {
        guard let (file, offset) = sink.sending else { return }
        guard upstreamOut.pendingBytes < highWater else { return }
        // What fits under the queue's hard cap (a reservation past it would fail the whole exchange).
        let want = min(128 * 1024, upstreamOut.maxCapacity - upstreamOut.pendingBytes)
        guard want > 0 else { return }
        var n = 0
        do {
            try upstreamOut.reserveOwned(want)
            n = try upstreamOut.withOwnedWritable { region in
                try file.read(at: offset, into: UnsafeMutableRawBufferPointer(rebasing: region.prefix(want)))
            }
        } catch {
            sink.fileFailed(error)
            return
        }
        if n == 0 {
            file.close()
            sink.sending = nil
            return
        }
        upstreamOut.commitOwned(n)
        sink.sending = (file, offset + UInt64(n))
    }

    /// Consumes what the kernel accepted from `upstreamOut`, keeping a copy while the request is replayable.
    private mutating func upstreamWrote(_ n: Int) {
        guard n > 0, n <= upstreamOut.pendingBytes else { return }
        if case .exchanging(let ex) = state {
            ex.upstreamAccepted &+= UInt64(n)
            ex.upstreamActivity = now
            if var log = ex.replayLog {
                ex.replayLog = nil
                if log.count + ex.replayBorrowedBytes + n <= config.pool.replayLimit {
                    // Part data lent from clientIn is only recorded: see settleClientInput.
                    ex.replayBorrowedBytes += upstreamOut.recordPrefix(n, copying: &log, borrowing: &ex.replayBorrowed)
                    ex.replayLog = log
                } else {
                    ex.dropBorrowedReplay()
                }
            }
            upstreamOut.consume(n)
            refillFromFile(ex)
        } else {
            upstreamOut.consume(n)
        }
    }

    /// Copies whatever still points into `clientIn` (part data lent to `upstreamOut`, the replay log's borrowed
    /// runs) into owned memory. The driver calls it before every read into `clientIn`; nothing else changes those
    /// bytes (the parsers only move its reader index).
    mutating func settleClientInput() {
        upstreamOut.settle()
        guard case .exchanging(let ex) = state, !ex.replayBorrowed.isEmpty else { return }
        if let log = ex.replayLog { ex.replayLog = OutputQueue.merge(log, ex.replayBorrowed) }
        ex.dropBorrowedReplay()
    }

    /// A reused connection the upstream had closed can be replaced: nothing of the response arrived and every
    /// byte written so far is in the replay log.
    private func canReplay(_ ex: Exchange) -> Bool {
        ex.reused && !ex.retried && !ex.upReceived && upstreamIn.readableBytes == 0 && ex.replayLog != nil
            && ex.body?.sink.fileFailure == nil
    }

    // MARK: - Response

    /// Moves response bytes from `upstreamIn` to `clientOut`; true if anything happened.
    private mutating func pumpResponse(_ ex: Exchange, into out: inout [Action]) -> Bool {
        var progressed = false
        while clientOut.readableBytes < config.buffers.outputHighWater {
            switch ex.response {
            case .awaitingHead:
                guard upstreamIn.readableBytes > 0 else {
                    if ex.upReadEnded { upstreamEnded(ex, into: &out); return true }
                    return progressed
                }
                if ex.responseParser.needsStorage { ex.responseParser.adoptStorage(pools?.fieldStorage.take() ?? HTTPHeaders.Storage()) }
                let result = upstreamIn.withUnsafeReadableBytes { bytes in
                    Result { () throws(HTTPParseError) in
                        try ex.responseParser.parse(bytes, requestMethod: ex.head.method)
                    }
                }
                // Consumed, so that `head` below is the last copy of the response head's fields, recycled once
                // the head is written.
                switch consume result {
                case .failure(let error):
                    log(kind: "upstream", "malformed upstream response head", error: "\(error)", into: &out)
                    reportHealth(ex, UpstreamFailure("bad_upstream_response", error: "\(error)"), into: &out)
                    abort(status: 502, kind: "bad_upstream_response", into: &out)
                    return true
                case .success(.needMore(let consumed)):
                    upstreamIn.moveReaderIndex(forwardBy: consumed)
                    if ex.upReadEnded { upstreamEnded(ex, into: &out); return true }
                    return progressed
                case .success(.complete(let head, let consumed)):
                    upstreamIn.moveReaderIndex(forwardBy: consumed)
                    progressed = true
                    if !head.isInformational { reportHealth(ex, nil, into: &out) }
                    if head.isInformational {
                        // Our own 100 Continue already went out; pass other 1xx (103 Early Hints) through.
                        if head.status != 100 {
                            HTTPHeadSerializer.withResponseHead(head, close: false) { _ = try? clientOut.writeBytes($0) }
                        }
                        continue
                    }
                    ex.responseKeepAlive = head.keepAlive
                    if !ex.requestComplete {
                        ex.closeAfter = true
                        // An early final answer that is not a success ends the request: nothing more goes up.
                        if head.status >= 300 {
                            ex.bodyDiscarded = true
                            ex.bodyDiscardedAt = now
                            startDiscarding()
                        }
                    }
                    if !ex.head.keepAlive || context.draining || head.framing == .closeDelimited {
                        ex.closeAfter = true
                    }
                    var head = head
                    if head.framing == .chunked && ex.head.version == .http1_0 {
                        // An HTTP/1.0 client cannot read chunked framing: send the payload close-delimited.
                        ex.dechunk = true
                        ex.closeAfter = true
                        head.headers.removeAll(named: "transfer-encoding")
                    }
                    // A close-delimited body goes to an HTTP/1.1 client chunked: its end (or a cut) stays visible.
                    let rechunk = head.framing == .closeDelimited && ex.head.version != .http1_0
                    if rechunk { head.headers.append(name: "Transfer-Encoding", value: "chunked") }
                    HTTPHeadSerializer.withResponseHead(head, close: ex.closeAfter) { _ = try? clientOut.writeBytes($0) }
                    ex.responseStarted = true
                    ex.upstreamHeadAt = now
                    ex.status = head.status
                    switch head.framing {
                    case .none: ex.response = .complete
                    case .contentLength(let n): ex.response = n == 0 ? .complete : .contentLength(remaining: n)
                    case .chunked: ex.response = .chunked(ChunkedDecoder(limits: config.http))
                    case .closeDelimited: ex.response = .closeDelimited(rechunk: rechunk)
                    }
                    var storage = head.headers.takeStorage()
                    pools?.fieldStorage.recycle(&storage)
                }
            case .contentLength(let remaining):
                let avail = upstreamIn.readableBytes
                if avail == 0 {
                    if ex.upReadEnded { upstreamEnded(ex, into: &out); return true }
                    return progressed
                }
                let room = clientOut.maxCapacity - clientOut.readableBytes
                let n = Int(min(UInt64(min(avail, room)), remaining))
                copyToClient(count: n)
                ex.response = remaining - UInt64(n) == 0 ? .complete : .contentLength(remaining: remaining - UInt64(n))
                progressed = true
            case .chunked(var decoder):
                let avail = upstreamIn.readableBytes
                if avail == 0 {
                    if ex.upReadEnded { upstreamEnded(ex, into: &out); return true }
                    return progressed
                }
                let room = clientOut.maxCapacity - clientOut.readableBytes
                let slice = min(avail, room)
                var offset = 0
                var ended = false
                var failed = false
                let dechunk = ex.dechunk
                let clientOut = self.clientOut
                upstreamIn.withUnsafeReadableBytes { bytes in
                    let view = UnsafeRawBufferPointer(rebasing: bytes[0..<slice])
                    do {
                        while let event = try decoder.decode(view, from: &offset) {
                            switch event {
                            case .end: ended = true
                            case .data(let span): if dechunk { _ = try? clientOut.writeBytes(span) }
                            }
                            if ended { break }
                        }
                    } catch {
                        failed = true
                    }
                }
                if failed {
                    log(kind: "upstream", "malformed upstream response body", error: nil, into: &out)
                    abort(status: 502, kind: "bad_upstream_response", into: &out)
                    return true
                }
                if dechunk {
                    upstreamIn.moveReaderIndex(forwardBy: offset)
                    if upstreamIn.readableBytes == 0 { upstreamIn.clear() }
                } else {
                    copyToClient(count: offset)
                }
                ex.response = ended ? .complete : .chunked(decoder)
                progressed = true
                if offset == 0 && !ended { return progressed }
            case .closeDelimited(let rechunk):
                let avail = upstreamIn.readableBytes
                if avail == 0 {
                    switch ex.upstreamRead {
                    case .open:
                        return progressed
                    case .ended:
                        if rechunk {
                            // Written whole or not yet: a full output waits for the client to take some.
                            guard clientOut.maxCapacity - clientOut.readableBytes >= Self.lastChunk.count else {
                                return progressed
                            }
                            _ = try? clientOut.writeBytes(Self.lastChunk)
                        }
                        ex.response = .complete
                        continue
                    case .failed:
                        // A reset is not the end of the body: the client must not see an end.
                        upstreamEnded(ex, into: &out)
                        return true
                    }
                }
                let room = clientOut.maxCapacity - clientOut.readableBytes
                if rechunk {
                    let count = min(avail, room - ChunkedEncoder.maxChunkHeaderLength - 2)
                    guard count > 0 else { return progressed }
                    writeChunkToClient(count: count)
                } else {
                    copyToClient(count: min(avail, room))
                }
                progressed = true
            case .complete:
                finishExchange(ex, into: &out)
                return true
            }
        }
        return progressed
    }

    /// The last chunk, with no trailer.
    private static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)
    private static let crlf: [UInt8] = [13, 10]

    /// `copyToClient` as one chunk: its size line, the bytes, CRLF.
    private func writeChunkToClient(count: Int) {
        withUnsafeTemporaryAllocation(byteCount: ChunkedEncoder.maxChunkHeaderLength, alignment: 1) { header in
            guard let n = ChunkedEncoder.writeChunkHeader(size: count, to: header) else { return }
            _ = try? clientOut.writeBytes(UnsafeRawBufferPointer(rebasing: header[..<n]))
        }
        copyToClient(count: count)
        _ = try? clientOut.writeBytes(Self.crlf)
    }

    private func copyToClient(count: Int) {
        guard count > 0 else { return }
        upstreamIn.withUnsafeReadableBytes { bytes in
            _ = try? clientOut.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[0..<count]))
        }
        upstreamIn.moveReaderIndex(forwardBy: count)
        if upstreamIn.readableBytes == 0 { upstreamIn.clear() }
    }

    /// The upstream's sending side ended before the response was complete.
    private mutating func upstreamEnded(_ ex: Exchange, into out: inout [Action]) {
        if !ex.responseStarted && canReplay(ex) {
            // A pooled connection the upstream had closed: replay the request once on a fresh connection.
            ex.retried = true
            // clientIn is as it was when the borrowed runs were recorded: nothing has read into it since.
            let log = OutputQueue.merge(ex.replayLog ?? [], ex.replayBorrowed)
            ex.dropBorrowedReplay()
            var unsent: [UInt8] = []
            upstreamOut.copyPrefix(upstreamOut.pendingBytes, into: &unsent)
            upstreamOut.clear()
            do {
                try upstreamOut.write(log)
                try upstreamOut.write(unsent)
            } catch {
                out.append(.log(FailureLine(kind: "upstream", msg: "upstream closed a reused connection, not replayed",
                                            requestID: ex.requestID, upstream: serverName(ex))))
                abort(status: 502, kind: "upstream_closed", into: &out)
                return
            }
            upstreamIn.clear()
            ex.upstream = .connecting
            ex.upstreamRead = .open
            ex.upWriteFailed = false
            ex.upReceived = false
            ex.reused = false
            ex.replayLog = nil
            ex.attemptStarted(at: now)
            out.append(.reconnectUpstream(group: ex.group))
            return
        }
        if ex.responseStarted {
            // Never let a truncated response look complete: close the client.
            out.append(.releaseUpstream(reuse: false))
            ex.upstream = .none
            out.append(.ended(auditRecord(ex, status: ex.status, reason: "upstream_closed",
                                          error: ex.upstreamRead == .failed ? "upstream_reset_mid_response"
                                                                           : "upstream_closed_mid_response")))
            if case .closeDelimited(rechunk: false) = ex.response { resetWhenClosing = true }
            if ex.dechunk { resetWhenClosing = true }
            clientEOF = true
            state = .closing(discard: false)
            if clientOut.readableBytes == 0 { finishClosing(into: &out) }
        } else {
            out.append(.log(FailureLine(kind: "upstream", msg: "upstream closed before answering",
                                        requestID: ex.requestID, upstream: serverName(ex))))
            reportHealth(ex, UpstreamFailure("upstream_closed"), into: &out)
            abort(status: 502, kind: "upstream_closed", into: &out)
        }
    }

    private mutating func finishExchange(_ ex: Exchange, into out: inout [Action]) {
        let fullySent = ex.requestComplete && !ex.bodyDiscarded && ex.body?.sink.sending == nil
            && upstreamOut.isEmpty
        let reuse = UpstreamReuse.allowed(
            responseKeepAlive: ex.responseKeepAlive, requestFullySent: fullySent,
            unreadResponseBytes: upstreamIn.readableBytes, readEnded: ex.upReadEnded,
            writeFailed: ex.upWriteFailed, draining: context.draining)
        out.append(.releaseUpstream(reuse: reuse))
        ex.upstream = .none
        ex.dropBorrowedReplay()
        if spareBorrowed.capacity == 0 { swap(&spareBorrowed, &ex.replayBorrowed) }
        if let log = ex.replayLog.take() {
            pools?.replayLogs.recycle(consume log)   // emptied in place: `log` is the only reference now
        }
        upstreamIn.clear()
        upstreamOut.clear()
        let unread = !ex.requestComplete || ex.bodyDiscarded
        out.append(.ended(auditRecord(ex, status: ex.status, reason: nil, error: nil)))
        // The request head's field arrays and the form stage's encoding array, for later requests (the exchange
        // is done with them).
        var storage = ex.takeHeadFieldStorage()
        pools?.fieldStorage.recycle(&storage)
        if let pools { ex.form?.giveBack(to: pools) }
        headParser.reset()
        if unread || ex.closeAfter || context.draining {
            if unread { startDiscarding() }
            state = .closing(discard: unread)
            if clientOut.readableBytes == 0 { finishClosing(into: &out) }
        } else {
            // A pipelined head already waiting starts its clock now.
            state = .awaitingHead(since: clientIn.readableBytes > 0 ? now : nil)
            releaseIdleBuffers()
        }
    }

    /// A keep-alive connection between requests holds no buffer memory: whatever is empty goes back to the
    /// allocator (the next request allocates again). Called when an exchange ends and when its answer has been
    /// flushed.
    private mutating func releaseIdleBuffers() {
        guard case .awaitingHead(since: nil) = state else { return }
        settleClientInput()   // nothing may stay lent or borrowed from the input buffer given back here
        clientIn.releaseStorage()
        clientOut.releaseStorage()
        upstreamIn.releaseStorage()
        upstreamOut.releaseStorage()
        if clientIn.readableBytes == 0 { headParser.releaseStorage() }
    }

    // MARK: - Failures and answers

    private mutating func fail(body error: RequestBodyError, into out: inout [Action]) {
        switch error {
        case .framing(let error):
            abort(status: error.status, kind: error.kind, into: &out)
        case .rejected(let violation), .form(.rejected(let violation)):
            abort(violation: violation, into: &out)
        case .form(.malformed(let error)):
            abort(status: 400, kind: "malformed_body", detail: error.kind.rawValue, into: &out)
        // The reason (errno text, paths) goes to stderr; the client only learns what failed.
        case .form(.quarantineFailed(let why)):
            log(kind: "quarantine", "quarantine failed", error: "\(why)", into: &out)
            abort(status: 503, kind: "quarantine_unavailable", detail: "the quarantine store cannot take the part",
                  into: &out)
        case .form(.antivirusFailed(let why)):
            log(kind: "antivirus", "antivirus failed", error: why, into: &out)
            abort(status: 503, kind: "antivirus_unavailable", detail: "the file could not be scanned", into: &out)
        case .form(.holdFailed(let why)):
            log(kind: "spool", "hold failed", error: "\(why)", into: &out)
            abort(status: 500, kind: "staging_failed", detail: "a part could not be staged", into: &out)
        }
    }

    /// Queues a `.log` line naming the current request.
    private func log(kind: String, _ msg: StaticString, error: String?, into out: inout [Action]) {
        guard case .exchanging(let ex) = state else { return }
        out.append(.log(FailureLine(kind: kind, msg: msg, requestID: ex.requestID, error: error,
                                    upstream: kind == "upstream" ? serverName(ex) : nil)))
    }

    private mutating func abort(violation: Violation, into out: inout [Action]) {
        abort(status: violation.status, kind: violation.kind.name, detail: violation.detail, violation: violation,
              into: &out)
    }

    /// Ends the exchange on an error: a JSON error if nothing of a response was queued yet; otherwise the
    /// client connection closes (a cut response never looks complete). The upstream is always dropped, so it
    /// sees an incomplete request.
    private mutating func abort(status: Int?, kind: String, detail: String? = nil, violation: Violation? = nil,
                                into out: inout [Action]) {
        guard case .exchanging(let ex) = state else { return }
        drop(ex, into: &out)
        upstreamOut.clear()
        upstreamIn.clear()
        if let status, !ex.responseStarted {
            respond(status: status, kind: kind, requestID: ex.requestID, detail: detail, violation: violation,
                    exchange: ex, into: &out)
        } else {
            out.append(.ended(auditRecord(ex, status: ex.status == 0 ? 499 : ex.status, reason: kind,
                                                 error: kind)))
            clientEOF = true   // a cut response: close without lingering
            state = .closing(discard: false)
            if clientOut.readableBytes == 0 { finishClosing(into: &out) }
        }
    }

    private mutating func respond(violation: Violation, exchange ex: Exchange, into out: inout [Action]) {
        respond(status: violation.status, kind: violation.kind.name, requestID: ex.requestID,
                detail: violation.detail, violation: violation, exchange: ex, into: &out)
    }

    /// Queues Formwall's own answer: JSON `{"error": KIND, "status": N, "part": NAME, "limit": N, "detail": …,
    /// "request_id": ID}`, or the same facts as an HTML page for a browser (`HTTPAccept.prefersHTMLErrors`).
    /// The connection closes after it; a body not read to its end is discarded, then lingered on.
    private mutating func respond(status: Int, kind: String, requestID: String, detail: String?,
                                  violation: Violation?, exchange ex: Exchange?, into out: inout [Action]) {
        if let ex, ex.upstream != .none {
            out.append(.releaseUpstream(reuse: false))
            ex.upstream = .none
        }
        var json = JSONLineWriter(capacity: 256)
        json.beginObject()
        json.key("error"); json.string(kind)
        json.key("status"); json.int(status)
        json.key("part"); json.string(violation?.part)
        json.key("limit"); if let l = violation?.limit { json.int(Int(clamping: l)) } else { json.null() }
        if let detail { json.key("detail"); json.string(detail) }
        json.key("request_id"); json.string(requestID)
        json.endObject()
        var bytes: [UInt8] = []
        // A 405 from a route's `methods` lists them (RFC 9110 §15.5.6).
        let allow = violation?.kind == .methodNotAllowed ? ex?.evaluator?.route?.methods : nil
        // A browser's form submission (Accept names text/html, not application/json) gets the same facts as a
        // page; JSON stays the default, and the only form when no head was parsed.
        let accept = ex.map { HTTPAccept(value: $0.head.headers.values(.accept).joined(separator: ",").utf8) }
        if let accept, accept.prefersHTMLErrors {
            let page = HTTPErrorPage.render(status: status, kind: kind, part: violation?.part,
                                            limit: violation?.limit, detail: detail, requestID: requestID)
            HTTPErrorResponse.write(status: status, body: page, contentType: HTTPErrorPage.contentType,
                                    requestID: requestID, varyAccept: true, allow: allow, into: &bytes)
        } else {
            HTTPErrorResponse.write(status: status, body: json.bytes, contentType: "application/json",
                                    requestID: requestID, varyAccept: accept != nil, allow: allow, into: &bytes)
        }
        _ = try? clientOut.writeBytes(bytes)
        if let ex {
            out.append(.ended(auditRecord(ex, status: status, reason: kind,
                                                 error: violation == nil ? kind : nil, violation: violation)))
        } else {
            out.append(.ended(headErrorRecord(status: status, kind: kind, requestID: requestID)))
        }
        // The request's body (or what follows a bad head) is not read to its end: read and discard it while
        // the answer goes out, then linger, so the client sees the answer rather than a reset.
        let unread = ex == nil || !(ex?.requestComplete ?? true) || ex?.bodyDiscarded == true
            || clientIn.readableBytes > 0
        if unread { startDiscarding() } else { clientIn.clear() }
        state = .closing(discard: unread)
        if clientOut.readableBytes == 0 { finishClosing(into: &out) }
    }

    /// The client can no longer receive anything: an exchange in progress is recorded as cut by the client, with
    /// `why` (`client_reset`, `client_closed`) as its reason and error.
    private mutating func peerGone(_ why: String, into out: inout [Action]) {
        if case .exchanging(let ex) = state {
            drop(ex, into: &out)
            out.append(.ended(auditRecord(ex, status: ex.status == 0 ? 499 : ex.status, reason: why, error: why)))
        }
        close(into: &out)
    }

    // MARK: - Closing and lingering

    private mutating func startDiscarding() {
        if lingerBudget == nil { lingerBudget = config.linger.bytes }
        clientIn.clear()
    }

    /// Drops what the client sent while answering or lingering; closes at EOF or past the byte budget.
    private mutating func discardClientInput(into out: inout [Action]) {
        let n = clientIn.readableBytes
        clientIn.clear()
        let budget = (lingerBudget ?? config.linger.bytes) - n
        lingerBudget = budget
        if budget < 0 {
            // Past the budget: close with unread input (the kernel resets) rather than read forever.
            if case .exchanging = state { peerGone("client_closed", into: &out) } else { close(into: &out) }
            return
        }
        if case .lingering(let until, _) = state {
            state = .lingering(until: until, idleUntil: min(until, now &+ Self.nanos(config.linger.timeout)))
        }
    }

    /// The answer is flushed and the connection will not carry another request: close, lingering first if the
    /// client may still be sending.
    private mutating func finishClosing(into out: inout [Action]) {
        guard case .closing(let discard) = state, discard, !clientEOF else {
            close(into: &out)
            return
        }
        state = .lingering(until: now &+ Self.nanos(config.linger.time),
                           idleUntil: now &+ Self.nanos(config.linger.timeout))
        clientIn.clear()
        out.append(.shutdownClientWrite)
    }

    /// Gives up an exchange's upstream connection (never pooled: its request did not end cleanly) and its files.
    private func drop(_ ex: Exchange, into out: inout [Action]) {
        if ex.upstream != .none {
            out.append(.releaseUpstream(reuse: false))
            ex.upstream = .none
        }
        ex.body?.sink.releaseFiles()
    }

    private mutating func close(into out: inout [Action]) {
        guard !isClosed else { return }
        if case .exchanging(let ex) = state {
            // Only reachable through `peerGone`/`abort`, which record first; kept total for safety.
            drop(ex, into: &out)
        }
        state = .closed
        out.append(resetWhenClosing ? .resetClient : .closeClient)
    }

    /// A timeout's seconds as nanoseconds, clamped to 0 … 10^9 s (a configured value never overflows).
    static func nanos(_ seconds: Double) -> UInt64 { UInt64(max(0, min(seconds, 1e9)) * 1e9) }

    // MARK: - Deadlines

    /// About once a second: every deadline of the current state against `now`.
    private mutating func tick(into out: inout [Action]) {
        let t = config.timeouts
        let elapsed = now &- lastTick
        lastTick = now
        func over(_ since: UInt64, _ seconds: Double) -> Bool { now > since && now - since > Self.nanos(seconds) }
        // Bytes of a response wait for the client, in any state (the tail of a response the upstream has finished
        // waits on in `closing` or between requests): since when no byte of them was taken (reset by each write).
        let responseWaiting = clientOut.readableBytes > 0
        if !responseWaiting {
            clientWaitingSince = 0
        } else if clientWaitingSince == 0 {
            clientWaitingSince = now
        }
        let sendTimedOut = responseWaiting && over(clientWaitingSince, t.clientSend)
        switch state {
        case .closed:
            return
        case .lingering(let until, let idleUntil):
            if now >= until || now >= idleUntil { close(into: &out) }
        case .closing(let discard):
            // The answer is still going out: only the client's taking no byte of it for the send timeout ends
            // it (a slow reader of a long response must not be cut because it sent its request long ago).
            if responseWaiting ? sendTimedOut : over(lastActivity, discard ? config.linger.time : t.clientBody) {
                close(into: &out)
            }
        case .awaitingHead(let since):
            if let since {
                if over(since, t.clientHeader) {
                    respond(status: 408, kind: "client_header_timeout", requestID: context.newRequestID(),
                            detail: nil, violation: nil, exchange: nil, into: &out)
                }
            } else if responseWaiting ? sendTimedOut : over(lastActivity, t.clientKeepAlive) {
                // Keep-alive counts from when the last response was flushed (`clientWrote`), not from the request.
                close(into: &out)
            }
        case .exchanging(let ex):
            let receiving = !ex.requestComplete && !ex.bodyDiscarded
            if receiving && wantsClientRead && elapsed < 5_000_000_000 { ex.bodyReadWanted &+= elapsed }
            let heldUp = receiving && !wantsClientRead
            if heldUp && over(lastActivity, 1) {
                // The upstream has held the body up for a second (reading paused by backpressure): the input and
                // output buffers, grown for a streaming body, keep only what they hold (measured: 1 MiB of storage
                // for 450 KiB of bytes); when the upstream drains, they grow again.
                settleClientInput()
                clientIn.shrinkToFit()
                upstreamOut.shrinkToFit()
            }
            if heldUp || bodyWasHeldUp { heldUpAt = now }
            bodyWasHeldUp = heldUp
            let responseHeldUp = ex.upstreamConnected && !ex.upReadEnded && !wantsUpstreamRead
            if responseHeldUp || responseWasHeldUp { responseHeldUpAt = now }
            responseWasHeldUp = responseHeldUp
            if sendTimedOut {
                // The client has taken no byte of the response for this long: its timeout (nginx's send_timeout).
                abort(status: 408, kind: "client_send_timeout", into: &out)
            } else if receiving && over(max(lastActivity, heldUpAt), t.clientBody) {
                // The client has been silent this long while Formwall wanted to read: its timeout, not the
                // upstream's.
                abort(status: 408, kind: "client_body_timeout", into: &out)
            } else if heldUp, ex.upstreamConnected, over(max(ex.upstreamActivity, lastActivity), t.upstreamResponse) {
                // The upstream has taken no byte of the body and sent nothing for the response timeout, and the
                // client waits on it (nginx's proxy_send_timeout): the upstream's failure.
                let error = "no request byte taken for \(t.upstreamResponse) s"
                out.append(.log(FailureLine(kind: "upstream", msg: "upstream stopped reading the request",
                                            requestID: ex.requestID, error: error, upstream: serverName(ex))))
                reportHealth(ex, UpstreamFailure("upstream_timeout", error: error), into: &out)
                abort(status: 504, kind: "upstream_timeout", into: &out)
            } else if receiving,
                      BodyRate.tooSlow(bytes: ex.body?.bytesIn ?? 0, readingNanos: ex.bodyReadWanted,
                                       minRate: t.clientBodyMinRate, grace: t.clientBodyRateGrace) {
                abort(status: 408, kind: "client_body_too_slow", into: &out)
            } else if ex.upstream == .connecting, let started = ex.connectStartedAt,
                      over(started, t.upstreamConnect) {
                let error = "no connection within \(t.upstreamConnect) s"
                out.append(.log(FailureLine(kind: "upstream", msg: "upstream connect timed out", requestID: ex.requestID,
                                            error: error, upstream: serverName(ex))))
                if !retryNextServer(ex, UpstreamFailure("upstream_connect_timeout", error: error), into: &out) {
                    abort(status: 504, kind: "upstream_connect_timeout", into: &out)
                }
            } else if ex.upstreamConnected, let done = ex.requestCompletedAt ?? ex.bodyDiscardedAt,
                      over(max(ex.upstreamActivity, done, responseHeldUpAt), t.upstreamResponse) {
                // Silent this long while Formwall wanted to read it: time in which the client held the response
                // up (`responseHeldUpAt`) is the client's, and its send timeout's.
                reportHealth(ex, UpstreamFailure("upstream_timeout", error: "no response for \(t.upstreamResponse) s"),
                             into: &out)
                abort(status: 504, kind: "upstream_timeout", into: &out)
            }
        }
    }

    /// The worker's drain timeout: close now; a request in flight is recorded as cut short.
    mutating func forceClose(into out: inout [Action]) {
        if case .exchanging(let ex) = state {
            drop(ex, into: &out)
            out.append(.ended(auditRecord(ex, status: ex.status == 0 ? 503 : ex.status, reason: "shutdown",
                                                 error: "drain_timeout")))
        }
        close(into: &out)
    }

    // MARK: - Content-Encoding

    enum ContentDecoding {
        case identity
        case decode([StreamInflater])
        case passUninspected
        case refuse(Violation)
    }

    /// The codings Content-Encoding field values list, in the order they were applied, `identity` (no coding)
    /// left out. The exchange fuzzer's mutator reads a request's coding with it, as the proxy does.
    static func contentCodingNames(_ values: [String]) -> [String] {
        values.flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && $0.lowercased() != "identity" }
    }

    /// What to do with a form body's Content-Encoding: nothing (none, or `identity`), decode its layers
    /// (outermost first), pass it through uninspected (`unknown-encoding pass`), or refuse it.
    func contentDecoding(_ head: HTTPRequestHead, route routeOfRequest: @autoclosure () -> Route?) -> ContentDecoding {
        let values = head.headers.values(.contentEncoding)
        guard !values.isEmpty else { return .identity }
        // Only a request with Content-Encoding needs the route, and a copy of it costs a retain and a release of
        // every array and string in it.
        let route = routeOfRequest()
        let names = Self.contentCodingNames(values)
        guard !names.isEmpty else { return .identity }
        let codings = names.map { StreamInflater.Coding(name: Substring($0)) }
        let rule = route?.location
        if codings.contains(where: { $0 == nil }) {
            if route?.unknownEncoding == .pass { return .passUninspected }
            let unknown = names.filter { StreamInflater.Coding(name: Substring($0)) == nil }
            return .refuse(Violation(kind: .encodingNotSupported, rule: rule,
                                     detail: "Content-Encoding \(unknown.joined(separator: ", ")) (gzip and deflate are decoded)"))
        }
        let limit = route?.encodingsMax ?? 1
        guard codings.count <= limit else {
            return .refuse(Violation(kind: .tooManyEncodings, rule: rule,
                                     detail: "\(codings.count) content codings, at most \(limit)", limit: UInt64(limit)))
        }
        var layers: [StreamInflater] = []
        // Listed in the order they were applied: undo the last first.
        for coding in codings.reversed().compactMap({ $0 }) {
            // Pieces no larger than the output high-water mark, so one piece past it still fits the queue's cap.
            do {
                layers.append(try StreamInflater(coding, piece: config.buffers.outputHighWater,
                                                 block: config.buffers.decodeBlock))
            } catch {
                return .refuse(Violation(kind: .internalError, detail: "\(error)"))
            }
        }
        return .decode(layers)
    }

    // MARK: - Upstream servers

    /// Asks for a connection to the exchange's upstream group (first attempt).
    private mutating func dialUpstream(_ ex: Exchange, into out: inout [Action]) {
        ex.upstream = .connecting
        ex.upstreamStartedAt = now
        ex.attemptStarted(at: now)
        ex.attempts = 1
        out.append(.connectUpstream(group: ex.group))
    }

    /// After a failed or timed-out connect (nothing of the request went upstream): the server's `failure`
    /// reported, the next server of the group, if one is left untried. False when every server was tried; the
    /// caller answers.
    private mutating func retryNextServer(_ ex: Exchange, _ failure: UpstreamFailure,
                                          into out: inout [Action]) -> Bool {
        reportHealth(ex, failure, into: &out)
        guard ex.attempts < config.upstreams[ex.group].servers.count else { return false }
        ex.attempts += 1
        ex.upstream = .connecting
        ex.attemptStarted(at: now)
        ex.server = nil
        out.append(.retryUpstream(group: ex.group))
        return true
    }

    /// Passive health: the exchange's server answered (`failure` nil) or failed.
    private func reportHealth(_ ex: Exchange, _ failure: UpstreamFailure?, into out: inout [Action]) {
        guard let server = ex.server else { return }
        out.append(.upstreamHealth(group: ex.group, server: server, failure: failure))
    }

    /// The server the exchange is talking to, `host:port`, for logs and the audit record.
    func serverName(_ ex: Exchange) -> String {
        let group = config.upstreams[ex.group]
        guard let server = ex.server, group.servers.indices.contains(server) else { return group.name }
        return group.servers[server].upstream.authority
    }

    // MARK: - Helpers

    /// `text` with every byte outside visible ASCII and space replaced by `?` (a header value must not carry CR,
    /// LF or other controls, whatever a certificate says).
    static func fieldSafe(_ text: String) -> String {
        String(decoding: text.utf8.map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }

    static func address(of peer: String) -> String {
        if peer.hasPrefix("["), let end = peer.firstIndex(of: "]") {
            return String(peer[peer.index(after: peer.startIndex)..<end])
        }
        if let colon = peer.lastIndex(of: ":") { return String(peer[..<colon]) }
        return peer
    }
}
