// Metadata disarm: pure streaming rewrites of an uploaded file part ("sanitize").
//
//   part body chunks ──feed──▶ Disarmer ──emit──▶ disarmed bytes (to the upstream)
//                               │ JPEG: marker segments; APP1/APP13/COM/most APPn skipped, the rest copied
//                               │ PNG:  chunks; tEXt/zTXt/iTXt/eXIf skipped, CRCs checked, the rest copied
//                               │ SVG:  tag tokenizer; script/foreignObject/on*/foreign href/DTD subsets cut
//                               ▼
//                           removed: ["exif", "gps", "comment", …] for the audit record
//
// No I/O, bounded memory: a disarmer holds at most a segment or chunk header (JPEG, PNG) or one tag (SVG,
// at most `SVGDisarmer.maximumTagLength` bytes); payloads stream through whatever their size. Output never
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
    /// JPEG (JFIF/EXIF): metadata segments dropped.
    case jpeg
    /// PNG: text and EXIF chunks dropped.
    case png
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
}

/// The `Disarmer` contract for every format: after an error the disarmer stays failed, and every later call throws
/// that first error again.
final class StickyDisarmer: Disarmer {
    private let format: DisarmFormat
    private var failure: DisarmError?

    init(_ format: DisarmFormat) { self.format = format }

    var removed: [String] { format.removed }

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
