import Glibc
import HTTP1
import Reactor

// The admin listener (`--admin HOST:PORT`): a tiny HTTP/1.1 server on the control loop (main thread), apart from
// the workers. One GET per connection, answered and closed.
//
//   accept ──► AdminConnection: read the head (HTTPRequestHeadParser, 4 KiB, 5 s for the whole exchange)
//              ──► AdminRoute ──► responder (ProxyServer: metrics from the workers, readiness probes, ...)
//              ──► reply(AdminResponse) ──► write, Connection: close ──► close
//
// At most `maxConnections` at once; beyond that a new connection is closed at once.

/// Which admin endpoint a request asks for, decided from its method and target alone.
public enum AdminRoute: Equatable, Sendable {
    /// `GET /metrics`: Prometheus text.
    case metrics
    /// `GET /healthz`: the process runs.
    case healthz
    /// `GET /readyz`: readiness checks.
    case readyz
    /// `GET /rules`: the policy in force.
    case rules
    /// `GET /upstreams`: each upstream group and server, up or down, with request and failure counts.
    case upstreams
    /// Any other path.
    case notFound
    /// Any method but GET.
    case methodNotAllowed

    /// The route for `method` and `target` (a query string is ignored).
    public static func route(method: String, target: String) -> AdminRoute {
        guard method == "GET" else { return .methodNotAllowed }
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        switch path {
        case "/metrics": return .metrics
        case "/healthz": return .healthz
        case "/readyz": return .readyz
        case "/rules": return .rules
        case "/upstreams": return .upstreams
        default: return .notFound
        }
    }
}

/// One admin answer.
public struct AdminResponse: Sendable, Equatable {
    /// The status code.
    public var status: Int
    /// The Content-Type.
    public var contentType: String
    /// The body.
    public var body: String
    /// Extra header lines (`Allow: GET`).
    public var headers: [(String, String)] = []

    /// A JSON answer.
    public static func json(_ status: Int, _ body: String) -> AdminResponse {
        AdminResponse(status: status, contentType: "application/json", body: body)
    }

    /// `{"error":KIND,"status":N}`.
    public static func error(_ status: Int, _ kind: String) -> AdminResponse {
        .json(status, "{\"error\":\(JSONText.quote(kind)),\"status\":\(status)}")
    }

    /// The whole HTTP/1.1 response, with Content-Length and `Connection: close`.
    public var bytes: [UInt8] {
        let body = Array(self.body.utf8)
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\nContent-Type: \(contentType)\r\n"
        head += "Content-Length: \(body.count)\r\nCache-Control: no-store\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        return Array((head + "\r\n").utf8) + body
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 431: "Request Header Fields Too Large"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }

    public static func == (a: AdminResponse, b: AdminResponse) -> Bool {
        a.status == b.status && a.contentType == b.contentType && a.body == b.body
            && a.headers.map { "\($0.0): \($0.1)" } == b.headers.map { "\($0.0): \($0.1)" }
    }
}

/// The admin listener on one event loop; every method runs on that loop's thread.
final class AdminServer: EventHandler {
    /// Answers a route; calls `reply` exactly once, now or later on the same loop.
    typealias Responder = (AdminRoute, EventLoop, _ reply: @escaping (AdminResponse) -> Void) -> Void

    /// Admin connections served at once.
    static let maxConnections = 16
    /// Request head limit.
    static let limits = HTTPLimits(maxHeadBytes: 4096, maxHeaderCount: 32)
    /// The whole exchange (head in, answer out) must finish within this.
    static let timeout: Duration = .seconds(5)

    let loop: EventLoop
    let responder: Responder
    private let listener: TCPListener
    private var registration: Registration?
    private var connections: [ObjectIdentifier: AdminConnection] = [:]

    /// Starts accepting on `listener`.
    init(listener: TCPListener, loop: EventLoop, responder: @escaping Responder) throws {
        self.listener = listener
        self.loop = loop
        self.responder = responder
        registration = try loop.register(fd: listener.fd, interest: .readable, handler: self)
    }

    func readable(loop: EventLoop) {
        while true {
            let result: IOResult<TCPSocket>
            do { result = try listener.accept() } catch {
                // Out of descriptors or memory: the listener is level-triggered, so stop listening for a moment
                // rather than spin on the control loop.
                pauseAccepting()
                return
            }
            guard case .processed(let socket) = result else { return }
            guard connections.count < Self.maxConnections else {
                try? socket.close()
                continue
            }
            let connection = AdminConnection(server: self, socket: socket)
            do {
                try connection.start()
                connections[ObjectIdentifier(connection)] = connection
            } catch {
                try? socket.close()
            }
        }
    }

    private func pauseAccepting() {
        guard let registration else { return }
        try? loop.setInterest([], for: registration)
        _ = loop.schedule(after: .milliseconds(100)) { [weak self] loop in
            guard let self, let registration = self.registration else { return }
            try? loop.setInterest(.readable, for: registration)
        }
    }

    func closed(_ connection: AdminConnection) {
        connections.removeValue(forKey: ObjectIdentifier(connection))
    }

    /// Stops listening and closes every admin connection.
    func close() {
        if let registration { try? loop.deregister(registration) }
        registration = nil
        try? listener.close()
        for connection in Array(connections.values) { connection.close() }
    }
}

/// One admin connection: read a head, answer once, close.
final class AdminConnection: EventHandler {
    private unowned let server: AdminServer
    private let socket: TCPSocket
    private var registration: Registration?
    private var parser = HTTPRequestHeadParser(limits: AdminServer.limits)
    private var answered = false
    private var output: [UInt8] = []
    private var written = 0
    private var timer: TimerID?
    private var isClosed = false

    init(server: AdminServer, socket: TCPSocket) {
        self.server = server
        self.socket = socket
    }

    func start() throws {
        registration = try server.loop.register(fd: socket.fd, interest: .readable, handler: self)
        timer = server.loop.schedule(after: AdminServer.timeout) { [weak self] _ in
            self?.timer = nil
            self?.close()
        }
    }

    func readable(loop: EventLoop) {
        guard !isClosed, !answered else { return }
        var chunk = [UInt8](repeating: 0, count: 2048)
        let result: IOResult<Int>
        do {
            result = try chunk.withUnsafeMutableBytes { try socket.read(into: $0) }
        } catch {
            close()
            return
        }
        guard case .processed(let n) = result else { return }
        guard n > 0 else { close(); return }
        let parsed: HTTPHeadParseResult<HTTPRequestHead>
        do {
            parsed = try chunk.withUnsafeBytes { try parser.parse(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
        } catch let error as HTTPParseError {
            send(.error(error.status, error.kind))
            return
        } catch {
            send(.error(400, "bad_request"))
            return
        }
        guard case .complete(let head, _) = parsed else { return }
        answered = true
        if let registration { try? loop.setInterest([], for: registration) }
        server.responder(AdminRoute.route(method: head.method, target: head.target), loop) { [weak self] response in
            self?.send(response)
        }
    }

    func writable(loop: EventLoop) { flush() }

    func hangup(loop: EventLoop) { close() }

    func error(loop: EventLoop) { close() }

    private func send(_ response: AdminResponse) {
        guard !isClosed, output.isEmpty else { return }
        answered = true
        output = response.bytes
        flush()
    }

    private func flush() {
        guard !isClosed else { return }
        while written < output.count {
            let result: IOResult<Int>
            do {
                result = try output.withUnsafeBytes { try socket.write(UnsafeRawBufferPointer(rebasing: $0[written...])) }
            } catch {
                close()
                return
            }
            guard case .processed(let n) = result else {
                if let registration { try? server.loop.setInterest(.writable, for: registration) }
                return
            }
            written += n
        }
        close()
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        if let timer { _ = server.loop.cancel(timer) }
        timer = nil
        if let registration { try? server.loop.deregister(registration) }
        registration = nil
        try? socket.close()
        server.closed(self)
    }
}
