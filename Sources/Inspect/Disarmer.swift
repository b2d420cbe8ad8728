// Metadata disarm: pure streaming rewrites of an uploaded file part ("sanitize").
//
//   part body chunks ──feed──▶ Disarmer ──emit──▶ disarmed bytes (to the upstream)
//                               │ JPEG: marker segments; an allowlist (SOF/DHT/DQT/DRI/SOS…, JFIF, Adobe, ICC)
//                               │ PNG:  chunks; critical + rendering chunks kept (allowlist), CRCs checked
//                               │ GIF:  blocks; images, graphic control, NETSCAPE2.0 looping kept
//                               │ WebP: RIFF chunks; VP8/VP8L/VP8X/ALPH/ANIM/ANMF/ICCP kept, RIFF size patched
//                               │ SVG:  tag tokenizer; script/foreignObject/on*/foreign href/DTD subsets cut
//                               ▼
//                           removed: ["exif", "gps", "comment", …] for the audit record
//                           patches: output bytes known only at the end (WebP's RIFF size), applied by the caller
//
// No I/O, bounded memory: a disarmer holds at most a segment, chunk or block header (JPEG, PNG, GIF, WebP), an
// ICC profile while it is judged (at most `ICCProfile.maximumSize` bytes), or one tag (SVG, at most
// `SVGDisarmer.maximumTagLength` bytes); everything else streams through whatever its size. Output never
// depends on how the input was split. Anything a hostile file can do ends in a thrown `DisarmError`, never a
// trap; after an error the disarmer stays failed.

/// A streaming rewrite of one file part that removes metadata or active content.
public protocol Disarmer: AnyObject {
    /// Consumes `bytes`, emitting output as soon as it is safe to (never holding more than a small bounded buffer).
    func feed(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError)
    /// End of the part: emits whatever is held; throws if the file ended in the middle of a structure.
    func finish(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError)
    /// What was removed, for the audit log, each name once in order of first removal: e.g. `["exif", "gps",
    /// "comment"]`, `["tEXt", "eXIf"]`, `["script", "onload", "external-href"]`.
    var removed: [String] { get }
    /// After a successful `finish`: bytes of the output to overwrite, because their value is known only at the
    /// end (WebP's RIFF size and VP8X flags). Empty for the other formats; at most two patches.
    var patches: [DisarmPatch] { get }
}

/// Bytes to write over the disarmed output at `offset` once the whole output was emitted.
public struct DisarmPatch: Sendable, Hashable {
    /// Offset in the output, counted from its first emitted byte.
    public let offset: Int
    /// The bytes that replace the ones emitted there.
    public let bytes: [UInt8]
}

/// Why a disarmer stopped: the input is malformed, or (SVG `.reject` mode) it holds content that must not pass.
public struct DisarmError: Error, Sendable, CustomStringConvertible {
    private enum Reason: Sendable {
        case malformed
        case rejected
    }

    private let reason: Reason
    /// A short human-readable explanation, e.g. `"jpeg: truncated segment"`, `"svg: rejected script"`.
    public let description: String

    /// True when the input was well-formed enough but carried content that `.reject` mode refuses.
    public var isRejection: Bool { reason == .rejected }

    static func malformed(_ message: String) -> DisarmError { DisarmError(reason: .malformed, description: message) }
    static func rejected(_ message: String) -> DisarmError { DisarmError(reason: .rejected, description: message) }
}

/// The formats a disarmer exists for.
public enum DisarmKind: Sendable, Hashable, CaseIterable {
    /// JPEG (JFIF/EXIF): only the segments rendering needs are kept.
    case jpeg
    /// PNG: only critical and rendering chunks are kept.
    case png
    /// GIF: only images, graphic control and the standard looping extension are kept.
    case gif
    /// WebP: only image, animation and (checked) ICC chunks are kept.
    case webp
    /// SVG: script, event handlers, foreign references and DTD subsets stripped or rejected (`SVGMode`).
    case svg
}

/// What an SVG disarmer does with active content.
public enum SVGMode: Sendable, Hashable {
    /// Cut it out and pass the rest of the document.
    case strip
    /// Throw `DisarmError` (with `isRejection`) at the first instance.
    case reject
}

/// Creates a fresh disarmer for one part of the given format.
public func makeDisarmer(for kind: DisarmKind, svgMode: SVGMode = .strip) -> Disarmer {
    switch kind {
    case .jpeg: return StickyDisarmer(JPEGDisarmer())
    case .png: return StickyDisarmer(PNGDisarmer())
    case .gif: return StickyDisarmer(GIFDisarmer())
    case .webp: return StickyDisarmer(WebPDisarmer())
    case .svg: return StickyDisarmer(SVGDisarmer(mode: svgMode))
    }
}

/// One format's rewrite. It may throw at any call; `StickyDisarmer` never calls it again after that.
protocol DisarmFormat: AnyObject {
    /// Consumes `bytes`, emitting output as soon as it is safe to.
    func run(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError)
    /// End of the part: throws if the file ended in the middle of a structure.
    func end(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError)
    /// What was removed (see `Disarmer.removed`).
    var removed: [String] { get }
    /// Output bytes to overwrite after `end` (see `Disarmer.patches`).
    var patches: [DisarmPatch] { get }
}

extension DisarmFormat {
    var patches: [DisarmPatch] { [] }
}

/// The `Disarmer` contract for every format: after an error the disarmer stays failed, and every later call throws
/// that first error again.
final class StickyDisarmer: Disarmer {
    private let format: DisarmFormat
    private var failure: DisarmError?

    init(_ format: DisarmFormat) { self.format = format }

    var removed: [String] { format.removed }

    var patches: [DisarmPatch] { failure == nil ? format.patches : [] }

    func feed(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        if let failure { throw failure }
        do throws(DisarmError) { try format.run(bytes, emit: emit) } catch {
            failure = error
            throw error
        }
    }

    func finish(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        if let failure { throw failure }
        do throws(DisarmError) { try format.end(emit: emit) } catch {
            failure = error
            throw error
        }
    }
}

/// The `removed` list: each name once, in order of first removal; at most `limit` names, then "more" (a hostile
/// SVG could otherwise grow it with a new on* name per tag).
struct DisarmLog {
    static let limit = 32
    private(set) var names: [String] = []

    mutating func note(_ name: String) {
        guard !names.contains(name) else { return }
        if names.count < DisarmLog.limit {
            names.append(name)
        } else if names.count == DisarmLog.limit {
            names.append("more")
        }
    }
}

extension UnsafeRawBufferPointer {
    /// The bytes `range` of this buffer (the caller checked the bounds).
    @inline(__always)
    func slice(_ range: Range<Int>) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: self[range]) }
}

/// Emits two bytes without allocating.
@inline(__always)
func emitPair(_ a: UInt8, _ b: UInt8, _ emit: (UnsafeRawBufferPointer) -> Void) {
    var pair = (a, b)
    withUnsafeBytes(of: &pair) { emit($0) }
}
