import HTTP1
import Reactor
import Rules

/// The request in progress on a client connection, as `ConnectionMachine` sees it. The two directions move
/// independently: the request body goes up (`body`, `bodyDiscarded`), the response comes down (`response`).
final class Exchange {
    /// Where the response relay is.
    enum Response {
        /// Waiting for the upstream's (final) response head.
        case awaitingHead
        /// Passing the body through.
        case contentLength(remaining: UInt64)
        case chunked(ChunkedDecoder)
        /// Until the upstream closes. With `rechunk`, each piece goes to the client as a chunk and the last chunk
        /// only after a clean end, so an HTTP/1.1 client can tell a cut response from a whole one.
        case closeDelimited(rechunk: Bool)
        /// Done.
        case complete
    }

    /// The upstream connection's part in this exchange.
    enum Upstream: Equatable {
        /// None yet (a spooled body dials only when complete), or released.
        case none
        /// `.connectUpstream` or `.reconnectUpstream` was asked; the answer is pending.
        case connecting
        /// Ready: bytes flow both ways.
        case connected
    }

    private(set) var head: HTTPRequestHead
    let requestID: String
    let startedAt: UInt64
    var body: RequestBodyStage?
    /// The policy evaluator from `begin` (nil without rules) until the body stages are made: then the stage that
    /// judges the body has taken it (`takeEvaluator`), and this is nil. Reading it copies it.
    var evaluator: PolicyEvaluator? { evaluatorSlot.value }
    private var evaluatorSlot = EvaluatorSlot(nil)
    /// Moves `evaluator` in (the slot's setter would copy it).
    func putEvaluator(_ evaluator: consuming PolicyEvaluator) { evaluatorSlot.put(evaluator) }
    /// Moves the evaluator out, leaving nil.
    func takeEvaluator() -> PolicyEvaluator? { evaluatorSlot.take() }
    /// The route's `modified-header` field name (nil: none, or no policy).
    var modifiedHeader: String?
    var form: FormStage?
    var urlencoded: UrlencodedStage?
    /// The spooled body's request head, written once the body is complete.
    var pendingHead: (HTTPRequestHead, HTTPForwardingContext)?
    /// The client address `--trusted-proxies` found in X-Forwarded-For; nil: the peer.
    var forwardedClient: String?
    /// The body is staged in a file and sent with a Content-Length once complete.
    var spooling = false
    /// A form body with a Content-Encoding Formwall cannot decode went through uninspected (`unknown-encoding
    /// pass`); its audit record says so.
    var encodingUninspected = false

    var upstream: Upstream = .none
    /// When the first dial for this request started (the audit record's `upstream_ms` counts from here).
    var upstreamStartedAt: UInt64?
    /// The upstream group (an index into the configuration's `upstreams`): the route's `upstream`, else 0.
    var group = 0
    /// The server of `group` connected or being dialled (as the driver reported it); nil before.
    var server: Int?
    /// Servers dialled for this request so far (a connect failure moves to the next).
    var attempts = 0
    /// When the current dial started: the attempt's start (the connect timeout runs from here, and the audit
    /// record's `upstream_connect_ms`, `upstream_header_ms` and `upstream_response_ms` count from it).
    var connectStartedAt: UInt64?
    /// When the current attempt's connection was ready; nil before it was, and again at each new attempt.
    var upstreamConnectedAt: UInt64?
    /// When the upstream's final (non-1xx) response head arrived.
    var upstreamHeadAt: UInt64?
    /// The last time upstream bytes moved either way.
    var upstreamActivity: UInt64 = 0
    /// The connection came from the pool.
    var reused = false
    /// The request was already moved once to a fresh connection.
    var retried = false
    /// Response bytes arrived on the current connection.
    var upReceived = false
    /// How the upstream's sending side stands.
    enum ReadSide {
        case open
        /// FIN: the upstream sent all it will send.
        case ended
        /// A reset or read error: what was read may be all, or a part (never an end of a close-delimited body).
        case failed
    }
    var upstreamRead: ReadSide = .open
    /// The upstream's sending side ended (FIN or a read error).
    var upReadEnded: Bool { upstreamRead != .open }
    /// Writing to the upstream failed; the response may still be read.
    var upWriteFailed = false
    /// Every byte written on a reused connection while it fits `pool.replayLimit`; nil once it does not.
    var replayLog: [UInt8]?
    /// Part data of the replay log still in `clientIn` (written upstream straight from it), recorded instead of
    /// copied: `ConnectionMachine.settleClientInput` copies it into `replayLog` before `clientIn` changes. Usually
    /// the response comes first and it is dropped uncopied.
    var replayBorrowed: [OutputQueue.Borrowed] = []
    /// Bytes in `replayBorrowed`.
    var replayBorrowedBytes = 0
    /// Bytes the kernel accepted for the upstream (head, framing and body).
    var upstreamAccepted: UInt64 = 0

    var response: Response = .awaitingHead
    var responseParser: HTTPResponseHeadParser
    /// The response status sent to the client, once known.
    var status = 0
    /// Some response bytes reached the client's output.
    var responseStarted = false
    /// Close the client connection once this response is flushed.
    var closeAfter = false
    /// The upstream's final response allows reusing its connection (no `Connection: close`, not HTTP/1.0
    /// without keep-alive, not close-delimited).
    var responseKeepAlive = false
    /// The response is chunked but the client speaks HTTP/1.0: pass only the payload, then close.
    var dechunk = false
    var requestCompletedAt: UInt64?
    /// Nothing more of the request body goes upstream (an early final answer, or the upstream stopped
    /// reading); what the client still sends is read and discarded.
    var bodyDiscarded = false
    /// When the body started being discarded: the upstream's answer is awaited from then on.
    var bodyDiscardedAt: UInt64?
    /// Nanoseconds during which the machine wanted to read the request body (for the minimum body rate).
    var bodyReadWanted: UInt64 = 0

    init(head: HTTPRequestHead, requestID: String, startedAt: UInt64, limits: HTTPLimits) {
        self.head = head
        self.requestID = requestID
        self.startedAt = startedAt
        responseParser = HTTPResponseHeadParser(limits: limits)
    }

    /// The request head's field arrays, for the pools (a later head's parser); the head keeps no fields
    /// afterwards, so call it only once the exchange has ended and its audit record is built.
    func takeHeadFieldStorage() -> HTTPHeaders.Storage { head.headers.takeStorage() }

    var requestComplete: Bool { body?.isComplete ?? true }
    var upstreamConnected: Bool { upstream == .connected }

    /// A dial (the first, the next server of the group, or a replay's fresh connection) starts at `now`.
    func attemptStarted(at now: UInt64) {
        connectStartedAt = now
        upstreamConnectedAt = nil
    }

    /// Forgets the replay log's borrowed runs without reading them.
    func dropBorrowedReplay() {
        guard !replayBorrowed.isEmpty else { return }
        replayBorrowed.removeAll(keepingCapacity: true)
        replayBorrowedBytes = 0
    }
}
