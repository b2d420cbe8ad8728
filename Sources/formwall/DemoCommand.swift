import Foundation
import Proxy
import Reactor

/// `formwall demo`: a working system from one command.
enum DemoCommand: Command {
    static let name = "demo"
    static let summary = "run the proxy, a built-in echo upstream and a live audit view, for trying Formwall"
    static let help = """
    Usage: formwall demo [--rules FILE] [--listen HOST:PORT] [--echo HOST:PORT]

    Starts, in one process:
      - the proxy on 127.0.0.1:8080 enforcing rules/demo.rules (route /upload: one image up to 5 MiB,
        sniffed as PNG/JPEG/GIF/WebP, plus an optional caption);
      - a built-in echo upstream on 127.0.0.1:8081 that answers with what it received (fields, and each
        file's name, size and sha256);
      - the audit log on stdout, one human line per request.
    Stop it with Ctrl-C.

    Try it:
      curl -F caption=hello -F image=@photo.png http://127.0.0.1:8080/upload       # accepted: 200
      head -c 7000000 /dev/urandom > big.png
      curl -F image=@big.png http://127.0.0.1:8080/upload                         # 413 body_too_large
      printf '<?php system($_GET[1]); ?>' > cat.jpg
      curl -F 'image=@cat.jpg;type=image/jpeg' http://127.0.0.1:8080/upload       # 415 type_not_allowed

    Options:
      --rules FILE        the policy (default rules/demo.rules, looked up from the current directory)
      --listen HOST:PORT  proxy address (default 127.0.0.1:8080)
      --echo HOST:PORT    echo upstream address (default 127.0.0.1:8081)
    """

    static func run(_ args: [String]) -> Int32 {
        let parsed: Arguments
        do { parsed = try Arguments(args, valued: ["rules", "listen", "echo"], flags: []) } catch {
            printError("\(error). Run `formwall demo --help`.")
            return 2
        }
        let rules = parsed.value("rules") ?? "rules/demo.rules"
        guard FileManager.default.fileExists(atPath: rules) else {
            printError("cannot find \(rules): run the demo from the repository root or pass --rules FILE")
            return 2
        }
        let listen = parsed.value("listen") ?? "127.0.0.1:8080"
        let echo = parsed.value("echo") ?? "127.0.0.1:8081"
        let upstream: EchoUpstream
        var config: ProxyConfiguration
        ProxyServer.blockSignals()   // before the echo thread starts, so it inherits the mask
        do {
            let echoAddress = try SocketAddress.resolve(echo)
            upstream = try EchoUpstream(address: echoAddress)
            config = ProxyConfiguration(listen: try SocketAddress.resolve(listen),
                                        upstream: try .parse("http://" + echo))
            config.rules = [rules]
            var audit = ProxyConfiguration.AuditSettings(path: "-")
            audit.human = true
            config.audit = audit
            config.timeouts.drain = 2
            config.logFormat = .text   // demo is for a terminal: event lines as `formwall: msg key=value`
        } catch {
            printError("cannot start the demo: \(error)")
            return 1
        }
        let server: ProxyServer
        do { server = try ProxyServer(configuration: config) } catch {
            upstream.shutdown()
            printError("cannot start the demo: \(error)")
            return 1
        }
        printError("demo: proxy on http://\(listen) enforcing \(rules); echo upstream on http://\(echo)")
        printError("demo: try  curl -F caption=hi -F image=@photo.png http://\(listen)/upload   (Ctrl-C stops)")
        do { try server.run() } catch {
            printError("\(error)")
            return 1
        }
        upstream.shutdown()
        return 0
    }
}
