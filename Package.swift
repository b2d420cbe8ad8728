// swift-tools-version:6.0
//
// Formwall: a streaming multipart/form-data filtering reverse proxy.
//
//   CLinux, COpenSSL, CZlib   C headers and static inline shims only
//   Multipart                 streaming parser, parameter parsing, canonical encoder (pure)
//   HTTP1                     request/response heads, chunked framing (pure; Multipart for its ByteWriter)
//   Inspect                   sniffing, hashing, filename checks, CSPRNG
//   Rules                     rule-file language and compiled Policy (pure)
//   Audit, Quarantine         JSON-lines audit sink; durable quarantine store
//   Reactor                   syscall funnel, epoll selector, event loop, timers, sockets
//   TLS                       OpenSSL contexts and sessions as a byte transform over memory BIOs
//   Proxy                     per-connection state machines and body stages
//   formwall                  thin executable: CLI, configuration, signals
import Foundation
import PackageDescription

// Release builds of the proxy's own modules leave exclusivity to the compiler's static checks and drop the
// run-time ones (`swift_beginAccess` on every access to a class's stored property): they were 18% of a
// worker's user time on small uploads (docs/performance.md, "Exclusivity checks"). The Swift standard library
// is built the same way. Debug builds keep the run-time checks, and the unit tests, the exchange and codec
// fuzzers (fuzz/run.sh compiles its own modules) run with them. Cross-module optimisation lets the optimiser
// see the bodies of other modules' functions (the proxy calls HTTP1, Multipart and Reactor on every request):
// 0.6% fewer instructions per small upload (docs/performance.md, ninth session). Release builds also link the
// Swift runtime and Foundation statically (`-static-stdlib` when compiling, so that Foundation's imports resolve
// to its static libraries, and when linking), as scripts/release.sh always did: the benchmarks and the
// end-to-end tests then run the binary that is shipped. Calls into the runtime (retain, release, allocation:
// about 550 per small upload) no longer go through the PLT, and the process maps 6 MiB less (docs/performance.md,
// twelfth session).
//
// Release builds are also optimised with an execution profile, pgo/formwall.profdata, recorded by bench/pgo/train.py
// from the proxy benchmarks (LLVM's IR-level profile-guided optimisation: branch weights, block layout and inlining
// follow the measured paths; code no benchmark reached is treated as cold). Small uploads: 6.6% fewer instructions
// and about 9% less user time per request (docs/performance.md, fifteenth session). A profile recorded from older
// source only loses speed: functions whose code changed get no profile. FORMWALL_PGO=0 in the environment builds
// without it, as does a checkout without the file. The compiler keeps an object file whose unoptimised code is
// unchanged even when the profile changed, so after a new profile, or FORMWALL_PGO toggled, build from scratch
// (`rm -rf .build`); bench/pgo/train.py removes the release objects itself.
let profile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("pgo/formwall.profdata").path
let profileFlags: [String] = ProcessInfo.processInfo.environment["FORMWALL_PGO"] != "0"
    && FileManager.default.fileExists(atPath: profile) ? ["-Xfrontend", "-ir-profile-use=\(profile)"] : []
let proxySettings: [SwiftSetting] = [
    .unsafeFlags(["-enforce-exclusivity=unchecked", "-cross-module-optimization", "-static-stdlib"] + profileFlags,
                 .when(configuration: .release)),
]
let staticStdlib: [LinkerSetting] = [.unsafeFlags(["-static-stdlib"], .when(configuration: .release))]

let package = Package(
    name: "Formwall",
    products: [
        .executable(name: "formwall", targets: ["formwall"]),
    ],
    targets: [
        .target(name: "CLinux"),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .target(name: "Multipart", dependencies: ["CLinux"], swiftSettings: proxySettings),
        .target(name: "HTTP1", dependencies: ["CLinux", "Multipart"], swiftSettings: proxySettings),
        .target(name: "Inspect", dependencies: ["CLinux", "COpenSSL", "CZlib"], swiftSettings: proxySettings),
        .target(name: "Rules", dependencies: ["Multipart"], swiftSettings: proxySettings),
        .target(name: "Audit", dependencies: ["CZlib"], swiftSettings: proxySettings),
        .target(name: "Quarantine", dependencies: ["Inspect", "COpenSSL"], swiftSettings: proxySettings),
        .target(name: "Reactor", dependencies: ["CLinux"], swiftSettings: proxySettings),
        .target(name: "TLS", dependencies: ["COpenSSL", "Reactor"], swiftSettings: proxySettings),
        .target(
            name: "Proxy",
            dependencies: ["CLinux", "Reactor", "HTTP1", "Multipart", "Rules", "Inspect", "Audit", "Quarantine", "TLS"],
            swiftSettings: proxySettings
        ),
        .executableTarget(
            name: "formwall",
            dependencies: [
                "CLinux", "Proxy", "Reactor", "HTTP1", "Multipart", "Rules", "Inspect", "Audit", "Quarantine", "TLS",
            ],
            swiftSettings: proxySettings,
            linkerSettings: staticStdlib
        ),
        .executableTarget(
            name: "formwall-bench",
            dependencies: ["Multipart", "Inspect"],
            path: "bench/codec",
            swiftSettings: proxySettings,
            linkerSettings: staticStdlib
        ),
        // The seeded generator the random and property tests share (test-only).
        .target(name: "TestRandom", path: "Tests/TestRandom"),
        // zlib deflate for test inputs (gzip, zlib and raw deflate streams; test-only).
        .target(name: "TestZlib", dependencies: ["CZlib"], path: "Tests/TestZlib"),
        .testTarget(name: "ShimTests", dependencies: ["CLinux", "COpenSSL", "CZlib"]),
        .testTarget(name: "MultipartTests", dependencies: ["Multipart", "Inspect", "COpenSSL", "TestRandom"], exclude: ["Fixtures"]),
        .testTarget(name: "HTTP1Tests", dependencies: ["HTTP1", "CLinux", "Multipart", "TestRandom"]),
        .testTarget(name: "InspectTests", dependencies: ["Inspect", "CZlib", "TestRandom", "TestZlib"]),
        .testTarget(name: "RulesTests", dependencies: ["Rules", "Multipart", "TestRandom"]),
        .testTarget(name: "AuditTests", dependencies: ["Audit", "TestRandom"]),
        .testTarget(name: "QuarantineTests", dependencies: ["Quarantine", "Inspect", "TestRandom"]),
        .testTarget(name: "ReactorTests", dependencies: ["Reactor", "CLinux", "TestRandom"]),
        .testTarget(name: "TLSTests", dependencies: ["TLS", "Reactor", "COpenSSL"]),
        // Counts heap allocations per thread by replacing malloc in the test executable (test-only: never a
        // dependency of a product). The linker exports an executable's symbol only if a shared library it
        // links refers to it; that covers malloc, free, realloc and posix_memalign but not calloc or the
        // memalign family, which these flags export so that libc's lookups find them too.
        .target(
            name: "CAllocCount",
            path: "Tests/CAllocCount",
            linkerSettings: [.unsafeFlags(["calloc", "memalign", "aligned_alloc", "valloc", "pvalloc"]
                .flatMap { ["-Xlinker", "--export-dynamic-symbol=\($0)"] })]
        ),
        .testTarget(
            name: "ProxyTests",
            dependencies: ["Proxy", "HTTP1", "Multipart", "Reactor", "Rules", "Inspect", "CAllocCount", "TestRandom",
                           "TestZlib", "TLS", "Quarantine"]
        ),
    ]
)
