import Glibc
import HTTP1
import Inspect
import Multipart
import Reactor
import Rules
import Audit

// One client connection and the exchange in progress on it.
//
//   client ──► input ──► HTTPRequestHeadParser ──► Exchange ──► RequestBodyStage ──► upstream.output ──► upstream
//   client ◄── output ◄── response head + body bytes (passed through) ◄── upstream.input ◄──────────────── upstream
//
// Backpressure: the client is read only while the upstream's output is below the high-water mark, and the
// upstream is read only while the client's output is. Pipelined requests wait in `input` until the current
// response is complete. Errors before any response byte was sent become a JSON error response; after that,
// the connection is closed so the client never mistakes a truncated response for a complete one.

/// The request currently being proxied on a client connection.
final class Exchange {
    enum Response {
        /// Waiting for the upstream's (final) response head.
        case awaitingHead
        /// Passing the body through.
        case contentLength(remaining: UInt64)
        case chunked(ChunkedDecoder)
        case closeDelimited
        /// Done.
        case complete
    }

    let head: HTTPRequestHead
    let requestID: String
    let startedAt: UInt64
    var body: RequestBodyStage?
    /// The policy evaluator for this request (nil without rules); the form stage holds the live one.
    var evaluator: PolicyEvaluator?
    var form: FormStage?
    var urlencoded: UrlencodedStage?
    var upstreamStartedAt: UInt64?
    /// The response status sent to the client, once known.
    var status = 0
    var bytesUpstream: UInt64 = 0
    var upstream: UpstreamConnection?
    var response: Response = .awaitingHead
    var responseParser: HTTPResponseHeadParser
    /// Some response bytes reached the client's output.
    var responseStarted = false
    /// Close the client connection once this response is flushed.
    var closeAfter = false
    var requestCompletedAt: UInt64?
    /// The response is chunked but the client speaks HTTP/1.0: pass only the payload, then close.
    var dechunk = false
    /// The upstream's final response allows reusing its connection (no `Connection: close`, not HTTP/1.0
    /// without keep-alive, not close-delimited).
    var responseKeepAlive = false
    /// The request was already moved once to a fresh upstream connection.
    var retried = false
    /// Nothing more of the request body goes upstream (an early final answer, or the upstream stopped
    /// reading); what the client still sends is read and discarded.
    var bodyDiscarded = false
    /// Nanoseconds during which Formwall wanted to read the request body (for the minimum body rate).
    var bodyReadWanted: UInt64 = 0

    init(head: HTTPRequestHead, requestID: String, startedAt: UInt64, limits: HTTPLimits) {
        self.head = head
        self.requestID = requestID
        self.startedAt = startedAt
        responseParser = HTTPResponseHeadParser(limits: limits)
    }

    var requestComplete: Bool { body?.isComplete ?? true }
}

/// A client connection: parses requests, drives one exchange at a time, writes responses.
final class ClientConnection: EventHandler {
    let worker: Worker
    private let socket: TCPSocket
    private let transport: PlainTransport
    private let input: ByteBuffer
    private let output: ByteBuffer
    private var registration: Registration?
    private var currentInterest: Interest = []
    private var headParser: HTTPRequestHeadParser
    private var exchange: Exchange?
    private var clientEOF = false
    private var closingAfterFlush = false
    private var closed = false
    private var lastActivity: UInt64
    private var headStartedAt: UInt64?
    /// The client's input is read and dropped: an answer is queued or sent for a request whose body was not
    /// read to its end. Charged to the linger budget.
    private var discardInput = false
    /// Lingering close in progress (our side shut down, reading until EOF or a limit).
    private var linger: (until: UInt64, idleUntil: UInt64)?
    private var lingerBudget = 0
    private var lastTick: UInt64
    let peer: String
    private var config: ProxyConfiguration { worker.config }

    init(worker: Worker, socket: TCPSocket) {
        self.worker = worker
        self.socket = socket
        transport = PlainTransport(socket)
        input = ByteBuffer(initialCapacity: 16 * 1024, maxCapacity: worker.config.buffers.clientRead)
        output = ByteBuffer(initialCapacity: 16 * 1024, maxCapacity: worker.config.buffers.outputHighWater * 4)
        headParser = HTTPRequestHeadParser(limits: worker.config.http)
        lastActivity = worker.loop.now()
        lastTick = lastActivity
        peer = socket.peerAddress ?? "unknown"
    }

    func start() throws {
        registration = try worker.loop.register(fd: socket.fd, interest: .readable, handler: self)
        currentInterest = .readable
    }

    // MARK: EventHandler

    func readable(loop: EventLoop) {
        guard !closed else { return }
        if discardInput || linger != nil {
            discardClientInput(loop: loop)
            return
        }
        if wantsClientRead {
            do {
                let room = input.maxCapacity - input.readableBytes
                let result = try transport.read(into: input, maxBytes: room)
                if case .processed(let n) = result {
                    if n == 0 { clientEOF = true } else {
                        lastActivity = loop.now()
                        if exchange == nil && headStartedAt == nil { headStartedAt = lastActivity }
                    }
                }
            } catch {
                clientEOF = true
                input.clear()
            }
        }
        pump()
    }

    func writable(loop: EventLoop) {
        guard !closed else { return }
        flushOutput()
        pump()
    }

    /// EPOLLERR: the client's socket failed (a reset). Nothing can be delivered any more.
    func error(loop: EventLoop) {
        guard !closed else { return }
        peerGone()
    }

    /// EPOLLHUP: both directions are closed (a reset, or FIN both ways while lingering). Epoll reports it even
    /// with no interest set, so it must end the connection rather than be ignored.
    func hangup(loop: EventLoop) {
        guard !closed else { return }
        if linger == nil && !discardInput && wantsClientRead { readable(loop: loop) }
        guard !closed else { return }
        peerGone()
    }

    /// The client can no longer receive anything: an exchange in progress is recorded as aborted.
    private func peerGone() {
        if let ex = exchange {
            ex.upstream?.close()
            ex.upstream = nil
            exchange = nil
            audit(ex, status: ex.status == 0 ? 499 : ex.status, reason: "client_closed", error: "client_closed")
        }
        close()
    }

    /// Reads and drops client bytes while an answer is pending or lingering; closes at EOF or past the budget.
    private func discardClientInput(loop: EventLoop) {
        input.clear()
        var total = 0
        while !closed {
            let result: IOResult<Int>
            do { result = try transport.read(into: input, maxBytes: min(input.maxCapacity, 64 * 1024)) } catch {
                close()
                return
            }
            guard case .processed(let n) = result else { break }
            input.clear()
            if n == 0 {
                clientEOF = true
                if linger != nil || output.readableBytes == 0 { close() } else { updateInterest() }
                return
            }
            total += n
            lingerBudget -= n
            if lingerBudget < 0 {
                // Past the budget: close with unread input (the kernel resets) rather than read forever.
                close()
                return
            }
            if total >= 256 * 1024 { break }   // fairness: let other connections run
        }
        let now = loop.now()
        lastActivity = now
        if let l = linger { linger = (l.until, min(l.until, now + nanos(config.linger.timeout))) }
    }

    private func nanos(_ seconds: Double) -> UInt64 { UInt64(max(0, seconds) * 1e9) }

    /// The answer is flushed and the connection will not carry another request: close, lingering first if the
    /// client may still be sending.
    private func finishClosing() {
        guard !closed else { return }
        guard discardInput, !clientEOF else {
            close()
            return
        }
        let now = worker.loop.now()
        linger = (now + nanos(config.linger.time), now + nanos(config.linger.timeout))
        try? transport.shutdownWrite()
        input.clear()
        updateInterest()
    }

    /// Marks the request body as not read to its end: the client's further bytes are discarded.
    private func startDiscarding() {
        if !discardInput { lingerBudget = config.linger.bytes }
        discardInput = true
        input.clear()
    }

    // MARK: The state machine

    /// Advances whatever can advance, then re-evaluates interests.
    private func pump() {
        guard !closed else { return }
        var progressed = true
        while progressed && !closed {
            progressed = false
            if let ex = exchange {
                if !ex.requestComplete, let body = ex.body, ex.upstream != nil {
                    progressed = pumpBody(ex, body) || progressed
                }
                if closed { return }
                if exchange === ex, !ex.requestComplete, !ex.bodyDiscarded, clientEOF, input.readableBytes == 0 {
                    // The client went away mid-upload: the upstream must see an incomplete body.
                    abortExchange(status: nil, kind: "client_aborted")
                    return
                }
                if let up = ex.upstream, exchange === ex { progressed = pumpResponse(ex, up) || progressed }
            } else if !closingAfterFlush {
                progressed = parseHead()
            }
        }
        if !closed && exchange == nil && clientEOF && !closingAfterFlush && output.readableBytes == 0 {
            close()
            return
        }
        if !closed, let ex = exchange, ex.bodyDiscarded, !discardInput {
            startDiscarding()
        }
        flushOutput()
        updateInterest()
    }

    /// Whether to read from the client now.
    /// Reading ahead while a response is awaited is allowed (pipelined requests wait in `input`, which is
    /// bounded); only backpressure from the upstream or a full input buffer stops reading. Keeping the
    /// interest steady saves an epoll_ctl pair per request.
    private var wantsClientRead: Bool {
        if linger != nil || discardInput { return !clientEOF }
        guard !clientEOF, !closingAfterFlush, input.readableBytes < input.maxCapacity else { return false }
        guard let ex = exchange, !ex.requestComplete, let up = ex.upstream else { return true }
        return up.output.readableBytes < config.buffers.outputHighWater
    }

    private func updateInterest() {
        guard let registration, !closed else { return }
        var want: Interest = []
        if wantsClientRead { want.insert(.readable) }
        if output.readableBytes > 0 { want.insert(.writable) }
        if want != currentInterest {
            currentInterest = want
            try? worker.loop.setInterest(want, for: registration)
        }
        if let up = exchange?.upstream {
            let wants = output.readableBytes < config.buffers.outputHighWater
            if up.wantsRead != wants {
                up.wantsRead = wants
                up.updateInterest()
            }
        }
    }

    private func parseHead() -> Bool {
        guard input.readableBytes > 0 else { return false }
        let result = input.withUnsafeReadableBytes { bytes in
            Result { () throws(HTTPParseError) in try headParser.parse(bytes) }
        }
        switch result {
        case .failure(let error):
            respondError(status: error.status, kind: error.kind, requestID: newRequestID(nil))
            return false
        case .success(.needMore(let consumed)):
            input.moveReaderIndex(forwardBy: consumed)
            return false
        case .success(.complete(let head, let consumed)):
            input.moveReaderIndex(forwardBy: consumed)
            headStartedAt = nil
            beginExchange(head)
            return true
        }
    }

    private func newRequestID(_ head: HTTPRequestHead?) -> String {
        if let given = head?.header(named: "x-request-id"), RequestID.isValid(given) { return given }
        return worker.random.hexID(bytes: 12)
    }

    private func beginExchange(_ requestHead: HTTPRequestHead) {
        var head = requestHead
        let requestID = newRequestID(head)
        let ex = Exchange(head: head, requestID: requestID, startedAt: worker.loop.now(), limits: config.http)
        exchange = ex
        if head.method == "CONNECT" {
            respondError(status: 405, kind: "method_not_allowed", requestID: requestID)
            return
        }

        // The policy decides first, from the head alone: 405, 415 and 413 (Content-Length) are answered
        // before a body byte is read, and before any 100 Continue.
        var evaluator = worker.policy.map { PolicyEvaluator(policy: $0) }
        var bodyKind: PolicyEvaluator.BodyKind?
        if evaluator != nil {
            let length: UInt64? = {
                switch head.framing {
                case .none: return 0
                case .contentLength(let n): return n
                case .chunked, .closeDelimited: return nil
                }
            }()
            let decision = evaluator!.begin(method: head.method, path: head.target,
                                            contentType: head.header(named: "content-type"), contentLength: length)
            ex.evaluator = evaluator
            switch decision {
            case .reject(let violation):
                respondViolation(violation, ex)
                return
            case .proceed(let kind):
                bodyKind = kind
            }
        }

        // Multipart bodies are decoded, checked and re-encoded canonically; everything else streams through.
        // The route's `upstream-body` setting wins over the global option.
        let bodyMode = evaluator?.route?.upstreamBody ?? config.upstreamBody
        var transform = RequestBodyStage.Transform.passthrough
        var upstreamFraming = head.framing
        let contentType = head.header(named: "content-type")
        let isMultipart = bodyKind == .multipart
            || (bodyKind == nil && contentType?.lowercased().hasPrefix("multipart/form-data") == true)
        if isMultipart, let ct = contentType {
            let parsed: MultipartBoundary.Parsed
            do {
                parsed = try MultipartBoundary.parse(contentType: Array(ct.utf8), limits: config.multipart)
            } catch {
                if evaluator != nil { _ = evaluator!.malformed(detail: error.kind.rawValue); ex.evaluator = evaluator }
                respondError(status: 400, kind: "malformed_body", requestID: requestID, detail: error.kind.rawValue)
                return
            }
            let fresh = worker.random.boundary()
            let quarantine = worker.quarantine.map {
                QuarantineContext(store: $0, requestID: requestID, route: evaluator?.route?.prefix, client: peerIP)
            }
            let stage = FormStage(boundary: parsed.boundary, limits: config.multipart, anomalies: parsed.anomalies,
                                  reencodeBoundary: fresh, evaluator: evaluator, quarantine: quarantine,
                                  spoolDirectory: config.spoolDirectory, holdPending: bodyMode == .hold,
                                  observe: config.audit != nil,
                                  previewFields: config.audit?.fields ?? [])
            ex.form = stage
            transform = .form(stage)
            head.headers.removeAll(named: "content-type")
            head.headers.append(name: "Content-Type", value: stage.encoder!.contentType)
            upstreamFraming = bodyMode == .spool ? .contentLength(0) : .chunked
        } else if isMultipart {
            respondError(status: 400, kind: "malformed_body", requestID: requestID, detail: "missing_boundary")
            return
        } else if bodyKind == .urlencoded, let evaluator {
            let stage = UrlencodedStage(evaluator: evaluator)
            ex.urlencoded = stage
            transform = .urlencoded(stage)
            head.headers.removeAll(named: "content-type")
            head.headers.append(name: "Content-Type", value: "application/x-www-form-urlencoded")
            upstreamFraming = bodyMode == .spool ? .contentLength(0) : .chunked
        }

        let up: UpstreamConnection
        do { up = try worker.acquireUpstream() } catch {
            respondError(status: 502, kind: "upstream_unreachable", requestID: requestID)
            return
        }
        ex.upstream = up
        ex.upstreamStartedAt = worker.loop.now()
        up.attach(to: self)

        var sinkKind: UpstreamSink.Kind
        switch upstreamFraming {
        case .chunked: sinkKind = .chunked
        case .none, .closeDelimited: sinkKind = .raw
        case .contentLength: sinkKind = .raw
        }
        let spooling = bodyMode == .spool && (ex.form != nil || ex.urlencoded != nil)
        if spooling {
            do { sinkKind = .spool(try TemporaryFile(directory: config.spoolDirectory)) } catch {
                respondError(status: 500, kind: "spool_unavailable", requestID: requestID)
                return
            }
        }
        let context = HTTPForwardingContext(clientAddress: peerIP, scheme: "http", requestID: requestID)
        var headBytes: [UInt8] = []
        headBytes.reserveCapacity(1024)
        if spooling {
            // Written once the body is complete and its length known.
            pendingHead = (head, context)
        } else {
            HTTPHeadSerializer.writeRequestHead(head, framing: upstreamFraming, context: context, into: &headBytes)
            do { try up.output.writeBytes(headBytes) } catch {
                respondError(status: 500, kind: "internal_buffer", requestID: requestID)
                return
            }
        }
        let sink = UpstreamSink(kind: sinkKind, buffer: up.output)
        sink.upstream = up
        let body = RequestBodyStage(framing: head.framing, limits: config.http, transform: transform, sink: sink)
        if ex.form == nil && ex.urlencoded == nil { body.evaluator = ex.evaluator }
        ex.body = body
        switch Result(catching: { () throws(RequestBodyError) in try body.start() }) {
        case .success: break
        case .failure(.rejected(let v)), .failure(.form(.rejected(let v))):
            abortExchange(violation: v)
            return
        case .failure:
            abortExchange(status: 400, kind: "malformed_body")
            return
        }
        if ex.requestComplete { requestDidComplete(ex) }
        guard exchange === ex else { return }   // the upstream failed synchronously: already answered
        if head.expectsContinue && !ex.requestComplete {
            // Formwall has accepted the request: tell the client to send the body.
            _ = try? output.writeBytes(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
        }
        // The head waits in the upstream's output: the body pump (or requestDidComplete) sends it together
        // with the first body bytes, in one write, and only then asks for writability if anything is left.
    }

    private var pendingHead: (HTTPRequestHead, HTTPForwardingContext)?

    private var peerIP: String {
        if peer.hasPrefix("["), let end = peer.firstIndex(of: "]") { return String(peer[peer.index(after: peer.startIndex)..<end]) }
        if let colon = peer.lastIndex(of: ":") { return String(peer[..<colon]) }
        return peer
    }

    /// Moves client body bytes through the body stage into the upstream's output; true if anything moved.
    private func pumpBody(_ ex: Exchange, _ body: RequestBodyStage) -> Bool {
        guard let up = ex.upstream else { return false }
        if up.writeFailed && !up.canReplay { ex.bodyDiscarded = true }
        guard !ex.bodyDiscarded else { return false }
        var moved = false
        while !body.isComplete, input.readableBytes > 0 || (body.isBlocked && up.spool == nil),
              up.output.readableBytes < config.buffers.outputHighWater {
            let wasBlocked = body.isBlocked
            let slice = min(input.readableBytes, 64 * 1024)
            let result = input.withUnsafeReadableBytes { bytes in
                Result { () throws(RequestBodyError) in try body.process(UnsafeRawBufferPointer(rebasing: bytes[0..<slice])) }
            }
            switch result {
            case .failure(.framing(let error)):
                abortExchange(status: error.status, kind: error.kind)
                return true
            case .failure(.rejected(let violation)):
                abortExchange(violation: violation)
                return true
            case .failure(.form(.rejected(let violation))):
                abortExchange(violation: violation)
                return true
            case .failure(.form(.malformed(let error))):
                abortExchange(status: 400, kind: "malformed_body", detail: error.kind.rawValue)
                return true
            case .failure(.form(.quarantineFailed(let why))):
                abortExchange(status: 503, kind: "quarantine_unavailable", detail: why)
                return true
            case .failure(.form(.holdFailed(let why))):
                abortExchange(status: 500, kind: "staging_failed", detail: why)
                return true
            case .success(let n):
                if let failure = body.sink.failure {
                    _ = failure
                    abortExchange(status: 500, kind: "body_sink_failed")
                    return true
                }
                if n == 0 && !body.isComplete {
                    if wasBlocked && !body.isBlocked { moved = true; continue }
                    break
                }
                input.moveReaderIndex(forwardBy: n)
                moved = moved || n > 0
            }
        }
        if body.isComplete && ex.requestCompletedAt == nil { requestDidComplete(ex) }
        if moved { up.flush(); up.updateInterest() }
        return moved
    }

    private func requestDidComplete(_ ex: Exchange) {
        ex.requestCompletedAt = worker.loop.now()
        guard let up = ex.upstream, let body = ex.body else { return }
        if case .spool(let file) = body.sink.kind, let (head, context) = pendingHead {
            pendingHead = nil
            var headBytes: [UInt8] = []
            HTTPHeadSerializer.writeRequestHead(head, framing: .contentLength(file.size), context: context, into: &headBytes)
            _ = try? up.output.writeBytes(headBytes)
            up.spool = (file, 0)
        }
        up.flush()
        up.updateInterest()
    }

    /// Moves response bytes from the upstream to the client; true if anything happened.
    private func pumpResponse(_ ex: Exchange, _ up: UpstreamConnection) -> Bool {
        var progressed = false
        while output.readableBytes < config.buffers.outputHighWater {
            switch ex.response {
            case .awaitingHead:
                guard up.input.readableBytes > 0 else {
                    if up.readEnded { upstreamEnded(ex, up); return true }
                    return progressed
                }
                let result = up.input.withUnsafeReadableBytes { bytes in
                    Result { () throws(HTTPParseError) in try ex.responseParser.parse(bytes, requestMethod: ex.head.method) }
                }
                switch result {
                case .failure:
                    abortExchange(status: 502, kind: "bad_upstream_response")
                    return true
                case .success(.needMore(let consumed)):
                    up.input.moveReaderIndex(forwardBy: consumed)
                    if up.readEnded { upstreamEnded(ex, up) ; return true }
                    return progressed
                case .success(.complete(let head, let consumed)):
                    up.input.moveReaderIndex(forwardBy: consumed)
                    progressed = true
                    if head.isInformational {
                        // Our own 100 Continue already went out; pass other 1xx (103 Early Hints) through.
                        if head.status != 100 {
                            var bytes: [UInt8] = []
                            HTTPHeadSerializer.writeResponseHead(head, close: false, into: &bytes)
                            _ = try? output.writeBytes(bytes)
                        }
                        continue
                    }
                    ex.responseKeepAlive = head.keepAlive
                    if !ex.requestComplete {
                        ex.closeAfter = true
                        // An early final answer that is not a success ends the request: nothing more goes up.
                        if head.status >= 300 { ex.bodyDiscarded = true }
                    }
                    if !ex.head.keepAlive || worker.draining || head.framing == .closeDelimited { ex.closeAfter = true }
                    var head = head
                    if head.framing == .chunked && ex.head.version == .http1_0 {
                        // An HTTP/1.0 client cannot read chunked framing: send the payload close-delimited.
                        ex.dechunk = true
                        ex.closeAfter = true
                        head.headers.removeAll(named: "transfer-encoding")
                    }
                    var bytes: [UInt8] = []
                    HTTPHeadSerializer.writeResponseHead(head, close: ex.closeAfter, into: &bytes)
                    _ = try? output.writeBytes(bytes)
                    ex.responseStarted = true
                    ex.status = head.status
                    switch head.framing {
                    case .none: ex.response = .complete
                    case .contentLength(let n): ex.response = n == 0 ? .complete : .contentLength(remaining: n)
                    case .chunked: ex.response = .chunked(ChunkedDecoder(limits: config.http))
                    case .closeDelimited: ex.response = .closeDelimited
                    }
                }
            case .contentLength(let remaining):
                let avail = up.input.readableBytes
                if avail == 0 {
                    if up.readEnded { upstreamEnded(ex, up); return true }
                    return progressed
                }
                let room = output.maxCapacity - output.readableBytes
                let n = Int(min(UInt64(min(avail, room)), remaining))
                copyToClient(up, count: n)
                ex.response = remaining - UInt64(n) == 0 ? .complete : .contentLength(remaining: remaining - UInt64(n))
                progressed = true
            case .chunked(var decoder):
                let avail = up.input.readableBytes
                if avail == 0 {
                    if up.readEnded { upstreamEnded(ex, up); return true }
                    return progressed
                }
                let room = output.maxCapacity - output.readableBytes
                let slice = min(avail, room)
                var offset = 0
                var ended = false
                var failed = false
                let dechunk = ex.dechunk
                up.input.withUnsafeReadableBytes { bytes in
                    let view = UnsafeRawBufferPointer(rebasing: bytes[0..<slice])
                    do {
                        while let event = try decoder.decode(view, from: &offset) {
                            switch event {
                            case .end: ended = true
                            case .data(let span): if dechunk { _ = try? output.writeBytes(span) }
                            }
                            if ended { break }
                        }
                    } catch {
                        failed = true
                    }
                }
                if failed {
                    abortExchange(status: 502, kind: "bad_upstream_response")
                    return true
                }
                if dechunk {
                    up.input.moveReaderIndex(forwardBy: offset)
                    if up.input.readableBytes == 0 { up.input.clear() }
                } else {
                    copyToClient(up, count: offset)
                }
                ex.response = ended ? .complete : .chunked(decoder)
                progressed = true
                if offset == 0 && !ended { return progressed }
            case .closeDelimited:
                let avail = up.input.readableBytes
                if avail == 0 {
                    if up.readEnded { ex.response = .complete; continue }
                    return progressed
                }
                copyToClient(up, count: min(avail, output.maxCapacity - output.readableBytes))
                progressed = true
            case .complete:
                finishExchange(ex, up)
                return true
            }
        }
        return progressed
    }

    private func copyToClient(_ up: UpstreamConnection, count: Int) {
        guard count > 0 else { return }
        up.input.withUnsafeReadableBytes { bytes in
            _ = try? output.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[0..<count]))
        }
        up.input.moveReaderIndex(forwardBy: count)
        if up.input.readableBytes == 0 { up.input.clear() }
    }

    /// The upstream closed before the response was complete.
    private func upstreamEnded(_ ex: Exchange, _ up: UpstreamConnection) {
        if !ex.responseStarted && !ex.retried && up.canReplay {
            // A pooled connection the upstream had closed: replay the request once on a fresh connection.
            ex.retried = true
            do {
                try up.reconnectForReplay()
                ex.upstreamStartedAt = worker.loop.now()
                up.flush()
                up.updateInterest()
                return
            } catch {
                abortExchange(status: 502, kind: "upstream_unreachable")
                return
            }
        }
        if ex.responseStarted {
            // Never let a truncated response look complete: close the client.
            up.close()
            ex.upstream = nil
            exchange = nil
            audit(ex, status: ex.status, reason: "upstream_closed", error: "upstream_closed_mid_response")
            closingAfterFlush = true
            clientEOF = true
            flushOutput()
            if output.readableBytes == 0 { finishClosing() }
        } else {
            abortExchange(status: 502, kind: "upstream_closed")
        }
    }

    private func finishExchange(_ ex: Exchange, _ up: UpstreamConnection) {
        ex.upstream = nil
        let reuse = UpstreamReuse.allowed(
            responseKeepAlive: ex.responseKeepAlive, requestFullySent: ex.requestComplete && !ex.bodyDiscarded
                && up.spool == nil && up.output.readableBytes == 0,
            unreadResponseBytes: up.input.readableBytes, readEnded: up.readEnded, writeFailed: up.writeFailed,
            draining: worker.draining)
        if reuse { worker.release(up) } else { up.close() }
        if !ex.requestComplete || ex.bodyDiscarded { startDiscarding() }
        exchange = nil
        audit(ex, status: ex.status, reason: nil, error: nil)
        headParser.reset()
        if input.readableBytes > 0 { headStartedAt = worker.loop.now() }   // a pipelined head: its clock starts
        if ex.closeAfter || worker.draining || discardInput { closingAfterFlush = true }
        flushOutput()
        if closingAfterFlush && output.readableBytes == 0 { finishClosing() }
    }

    /// Ends the exchange on an error: a JSON error if nothing was sent yet, the upstream closed without
    /// completing its request, the client closed after the error is flushed.
    private func abortExchange(status: Int?, kind: String, detail: String? = nil, violation: Violation? = nil) {
        let ex = exchange
        ex?.upstream?.close()
        ex?.upstream = nil
        ex?.body?.sink.releaseSpool()
        if let status, !(ex?.responseStarted ?? false) {
            respond(status: status, kind: kind, requestID: ex?.requestID ?? newRequestID(nil), detail: detail,
                    violation: violation)
        } else {
            exchange = nil
            if let ex { audit(ex, status: ex.status == 0 ? 499 : ex.status, reason: kind, error: kind) }
            closingAfterFlush = true
            clientEOF = true   // a cut response: close without lingering, never look complete
            flushOutput()
            if output.readableBytes == 0 { finishClosing() }
        }
    }

    private func abortExchange(violation: Violation) {
        abortExchange(status: violation.status, kind: violation.kind.name, detail: violation.detail,
                      violation: violation)
    }

    /// Answers a policy rejection.
    private func respondViolation(_ violation: Violation, _ ex: Exchange) {
        respond(status: violation.status, kind: violation.kind.name, requestID: ex.requestID, detail: violation.detail,
                violation: violation)
    }

    /// Queues a JSON error response and closes the connection after it is sent.
    private func respondError(status: Int, kind: String, requestID: String, detail: String? = nil) {
        respond(status: status, kind: kind, requestID: requestID, detail: detail, violation: nil)
    }

    /// `{"error": KIND, "status": N, "part": NAME, "limit": N, "detail": …, "request_id": ID}`, or the same facts
    /// as an HTML page for a browser (`HTTPAccept.prefersHTMLErrors`); the connection closes after it (a rejected
    /// request's body is never read to its end).
    private func respond(status: Int, kind: String, requestID: String, detail: String?, violation: Violation?) {
        let ex = exchange
        if let ex {
            ex.upstream?.close()
            ex.upstream = nil
            exchange = nil
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
        // A browser's form submission (Accept names text/html, not application/json) gets the same facts as a
        // page; JSON stays the default, and the only form when no head was parsed.
        let accept = ex.map { HTTPAccept(value: $0.head.headers.values(named: "accept").joined(separator: ",").utf8) }
        if let accept, accept.prefersHTMLErrors {
            let page = HTTPErrorPage.render(status: status, kind: kind, part: violation?.part, limit: violation?.limit,
                                            detail: detail, requestID: requestID)
            HTTPErrorResponse.write(status: status, body: page, contentType: HTTPErrorPage.contentType,
                                    requestID: requestID, varyAccept: true, into: &bytes)
        } else {
            HTTPErrorResponse.write(status: status, body: json.bytes, contentType: "application/json",
                                    requestID: requestID, varyAccept: accept != nil, into: &bytes)
        }
        _ = try? output.writeBytes(bytes)
        if let ex {
            audit(ex, status: status, reason: kind, error: violation == nil ? kind : nil, violation: violation)
        } else {
            auditHeadError(status: status, kind: kind, requestID: requestID)
        }
        closingAfterFlush = true
        // The request's body (or what follows a bad head) is not read to its end: read and discard it while
        // the answer goes out, then linger, so the client sees the answer rather than a reset.
        if ex == nil || !(ex?.requestComplete ?? true) || ex?.bodyDiscarded == true || input.readableBytes > 0 {
            startDiscarding()
        } else {
            input.clear()
        }
        flushOutput()
        if output.readableBytes == 0 { finishClosing() }
    }

    // MARK: Audit

    /// Writes the one audit record of an exchange.
    private func audit(_ ex: Exchange, status: Int, reason: String?, error: String?, violation: Violation? = nil) {
        worker.stats.completedRequests.add(1, ordering: .relaxed)
        guard worker.config.audit != nil else { return }
        let now = worker.loop.now()
        let evaluator = ex.form?.evaluator ?? ex.urlencoded?.evaluator ?? ex.body?.evaluator ?? ex.evaluator
        let monitoring = evaluator?.policy.mode == .monitor
        let refused = violation != nil || (error != nil && (status < 500 || status == 503) && status != 499)
        let decision: AuditRecord.Decision = refused ? .reject
            : monitoring && !(evaluator?.findings.isEmpty ?? true) ? .monitor
            : (ex.form?.modified ?? ex.urlencoded?.modified ?? false) ? .modified : .allow
        var anomalies = ex.form?.parser.anomalies ?? MultipartAnomalies()
        let parts: [AuditRecord.Part] = (ex.form?.records ?? ex.urlencoded?.records ?? []).map { r in
            anomalies.formUnion(r.part.anomalies)
            return AuditRecord.Part(
                index: r.index, name: AuditText(bytes: r.part.name ?? []), kind: r.part.isFile ? .file : .field,
                filename: r.part.filename.map { AuditText(bytes: $0) }, declaredType: r.part.contentTypeString,
                sniffedType: r.sniffedType, size: Int(clamping: r.size), sha256: r.part.isFile ? r.sha256 : nil, action: r.action,
                quarantineID: r.quarantineID)
        }
        let violations = (evaluator?.findings ?? []).map { f in
            AuditRecord.Violation(kind: f.violation.kind.name, part: f.violation.partIndex,
                                  rule: f.violation.rule.map { "\($0.file):\($0.line)" }, detail: f.violation.detail)
        }
        let matched = evaluator.flatMap { $0.policy.route(for: ex.head.target) }?.prefix
        var fields: [AuditRecord.Field]?
        if let wanted = config.audit?.fields, !wanted.isEmpty {
            fields = (ex.form?.records ?? ex.urlencoded?.records ?? []).compactMap { r in
                guard !r.part.isFile, let name = r.part.nameString, wanted.contains(name), let value = r.preview else {
                    return nil
                }
                return AuditRecord.Field(name: AuditText(name), value: AuditText(value))
            }
        }
        let record = AuditRecord(
            timestamp: .now(), requestID: ex.requestID, client: peer, method: ex.head.method,
            path: AuditText(ex.head.target), route: matched, decision: decision, status: status,
            reason: violation?.kind.name ?? reason, bytesIn: Int(clamping: ex.body?.bytesIn ?? 0),
            bytesUpstream: Int(clamping: ex.body?.sink.payloadBytes ?? 0),
            durationMs: Double(now &- ex.startedAt) / 1e6,
            upstreamMs: ex.upstreamStartedAt.map { Double(now &- $0) / 1e6 },
            parts: parts, violations: violations, anomalies: anomalies.names, fields: fields, error: error)
        worker.writeAudit(record)
    }

    /// A request refused before its head could be parsed still gets a record.
    private func auditHeadError(status: Int, kind: String, requestID: String) {
        worker.stats.completedRequests.add(1, ordering: .relaxed)
        guard worker.config.audit != nil else { return }
        let record = AuditRecord(timestamp: .now(), requestID: requestID, client: peer, method: "-", path: "-",
                                 route: nil, decision: .reject, status: status, reason: kind, error: kind)
        worker.writeAudit(record)
    }

    private func flushOutput() {
        guard !closed, output.readableBytes > 0 else { return }
        do {
            _ = try transport.write(from: output)
        } catch {
            // The client is gone: nothing more can be delivered.
            if let ex = exchange {
                ex.upstream?.close()
                ex.upstream = nil
                exchange = nil
                audit(ex, status: ex.status == 0 ? 499 : ex.status, reason: "client_closed", error: "client_closed")
            }
            close()
            return
        }
        if closingAfterFlush && output.readableBytes == 0 { finishClosing() }
    }

    // MARK: Upstream callbacks

    func upstreamReadable(_ up: UpstreamConnection) {
        guard !closed, let ex = exchange, ex.upstream === up else { return }
        pump()
    }

    func upstreamDrained(_ up: UpstreamConnection) {
        guard !closed, let ex = exchange, ex.upstream === up else { return }
        pump()
    }

    func upstreamFailed(_ up: UpstreamConnection, reason: UpstreamFailure) {
        guard !closed, let ex = exchange, ex.upstream === up else { return }
        ex.upstream = nil
        switch reason {
        case .connect:
            // The errno is not shown to the client: it would reveal the upstream address.
            abortExchange(status: 502, kind: "upstream_unreachable")
        }
    }

    // MARK: Timeouts and shutdown

    /// Called about once a second by the worker.
    func tick(now: UInt64) {
        guard !closed else { return }
        let t = config.timeouts
        let elapsed = now &- lastTick
        lastTick = now
        func over(_ since: UInt64, _ seconds: Double) -> Bool { now > since && now - since > UInt64(seconds * 1e9) }
        if let l = linger {
            if now >= l.until || now >= l.idleUntil { close() }
            return
        }
        if let ex = exchange {
            if !ex.requestComplete && !ex.bodyDiscarded && wantsClientRead && elapsed < UInt64(5e9) {
                ex.bodyReadWanted &+= elapsed
            }
            if !ex.requestComplete && !ex.bodyDiscarded && over(lastActivity, t.clientBody) {
                abortExchange(status: 408, kind: "client_body_timeout")
            } else if !ex.requestComplete && !ex.bodyDiscarded,
                      BodyRate.tooSlow(bytes: ex.body?.bytesIn ?? 0, readingNanos: ex.bodyReadWanted,
                                       minRate: t.clientBodyMinRate, grace: t.clientBodyRateGrace) {
                abortExchange(status: 408, kind: "client_body_too_slow")
            } else if let up = ex.upstream, up.isConnecting, over(up.connectStartedAt, t.upstreamConnect) {
                abortExchange(status: 504, kind: "upstream_connect_timeout")
            } else if let up = ex.upstream, let done = ex.requestCompletedAt,
                      over(max(up.lastActivity, done), t.upstreamResponse) {
                abortExchange(status: 504, kind: "upstream_timeout")
            }
        } else if closingAfterFlush {
            if over(lastActivity, discardInput ? config.linger.time : t.clientBody) { close() }
        } else if let started = headStartedAt, input.readableBytes > 0 || headStartedAt != nil {
            if over(started, t.clientHeader) {
                respondError(status: 408, kind: "client_header_timeout", requestID: newRequestID(nil))
            }
        } else if over(lastActivity, t.clientKeepAlive) {
            close()
        }
    }

    /// Drain: an idle keep-alive connection closes now; a busy one after its response.
    func drainIfIdle() {
        if exchange == nil && headStartedAt == nil && output.readableBytes == 0 { close() }
    }

    /// Closes now (drain timeout); a request still in flight is recorded as cut short.
    func forceClose() {
        if let ex = exchange {
            ex.upstream?.close()
            ex.upstream = nil
            exchange = nil
            audit(ex, status: ex.status == 0 ? 503 : ex.status, reason: "shutdown", error: "drain_timeout")
        }
        close()
    }

    private func close() {
        guard !closed else { return }
        closed = true
        if let ex = exchange {
            ex.upstream?.close()
            exchange = nil
        }
        if let registration { try? worker.loop.deregister(registration) }
        registration = nil
        try? transport.close()
        worker.connectionClosed(self)
    }
}

extension UpstreamSink {
    /// Releases a spool file early (on abort).
    func releaseSpool() {
        if case .spool(let file) = kind { file.close() }
    }
}

/// When an upstream connection may go back to the pool after an exchange. Pure, so it is tested as a table.
enum UpstreamReuse {
    /// True only if the response allows it, the whole request went up, the response ended exactly at the end
    /// of what was read, neither direction failed, and the worker is not draining.
    static func allowed(responseKeepAlive: Bool, requestFullySent: Bool, unreadResponseBytes: Int,
                        readEnded: Bool, writeFailed: Bool, draining: Bool) -> Bool {
        responseKeepAlive && requestFullySent && unreadResponseBytes == 0 && !readEnded && !writeFailed && !draining
    }
}

/// The minimum request-body rate (slow-loris on the body).
enum BodyRate {
    /// Whether `bytes` received over `readingNanos` of wanting to read is below `minRate` bytes per second,
    /// once `grace` seconds of reading have passed. A `minRate` of 0 turns the check off.
    static func tooSlow(bytes: UInt64, readingNanos: UInt64, minRate: Int, grace: Double) -> Bool {
        guard minRate > 0, Double(readingNanos) >= grace * 1e9, readingNanos > 0 else { return false }
        let rate = Double(bytes) / (Double(readingNanos) / 1e9)
        return rate < Double(minRate)
    }
}
