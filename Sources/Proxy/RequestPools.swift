import HTTP1
import Reactor

/// Storage one worker keeps between requests, so that a request in steady state takes arrays and buffers
/// its predecessors gave back instead of allocating them: every pool is bounded, and an idle connection holds
/// none of it. Used on one event-loop thread only (the worker's, or a test's rig).
///
///   take ──► a request's parser, stage or log uses it ──► recycle (emptied there) ──► the next request
final class RequestPools {
    /// Buffers for the connections' ByteBuffers and output queues (Reactor's `StoragePool`): at most 64 blocks
    /// of each size and 2 MiB in all.
    let storage = StoragePool(blocksPerSize: 64, byteBudget: 2 << 20)
    /// Replay logs of requests on reused upstream connections: at most 64, each of at most `replayLimit` bytes,
    /// 1 MiB in all.
    var replayLogs: ArrayPool<UInt8>
    /// Field arrays of finished heads, for the head parsers: at most 64 pairs, each of at most 64 fields (2.5 KiB
    /// of entries) and 4 KiB of name and value bytes.
    var fieldStorage = FieldStoragePool()
    /// Part record lists of finished form stages: at most 64 lists of at most 16 records.
    var partRecords = ArrayPool<PartRecord>(maxArrays: 64, maxCapacity: 16)
    /// Part states of finished form stages (`FormStage.Current`), cleared: at most 64 (about 400 bytes each).
    private var partStates: [FormStage.Current] = []

    /// A cleared part state for a new form stage, when the pool holds one.
    func takePartState() -> FormStage.Current? { partStates.popLast() }

    /// Keeps a cleared part state for a later stage, within the bound.
    func recyclePartState(_ state: FormStage.Current) {
        if partStates.count < 64 { partStates.append(state) }
    }

    /// Pools for requests whose replay logs hold at most `replayLimit` bytes (`pool.replay-limit`).
    init(replayLimit: Int) {
        replayLogs = ArrayPool(maxArrays: 64, maxCapacity: replayLimit, maxBytes: 1 << 20)
    }
}

/// The two arrays of finished heads' fields (`HTTPHeaders.Storage`), kept for the head parsers.
struct FieldStoragePool {
    private var bytes = ArrayPool<UInt8>(maxArrays: 64, maxCapacity: 4096)
    private var entries = ArrayPool<HTTPHeaders.Entry>(maxArrays: 64, maxCapacity: 64)

    /// A pair of empty arrays, with the capacity of recycled ones when the pool holds them.
    mutating func take() -> HTTPHeaders.Storage {
        HTTPHeaders.Storage(bytes: bytes.take(), entries: entries.take())
    }

    /// Empties both arrays, keeping their capacity, and keeps them for a later `take`, within the bounds; `storage`
    /// is left without them. Taken by `inout` so that each array is passed on as its only reference (a copy
    /// of a consumed argument would share them, and emptying a shared array allocates a new one).
    mutating func recycle(_ storage: inout HTTPHeaders.Storage) {
        bytes.recycle(moveOut(&storage.bytes, leaving: []))
        entries.recycle(moveOut(&storage.entries, leaving: []))
    }
}

/// Emptied arrays kept for reuse: at most `maxArrays`, each with room for at most `maxCapacity` elements
/// (larger ones go back to the allocator), and at most `maxBytes` of element storage in all.
struct ArrayPool<Element> {
    let maxArrays: Int
    let maxCapacity: Int
    let maxBytes: Int
    private var arrays: [[Element]] = []
    /// Element storage of the kept arrays, in bytes (capacity × stride).
    private(set) var keptBytes = 0

    init(maxArrays: Int, maxCapacity: Int, maxBytes: Int = .max) {
        self.maxArrays = maxArrays
        self.maxCapacity = maxCapacity
        self.maxBytes = maxBytes
    }

    /// An empty array, with the capacity of a recycled one when the pool holds one.
    mutating func take() -> [Element] {
        guard let array = arrays.popLast() else { return [] }
        keptBytes -= Self.bytes(array.capacity)
        return array
    }

    /// Empties `array`, keeping its capacity, and keeps it for a later `take`, within the bounds. Pass the last
    /// reference (`consume`, or a value just taken out of its owner): a shared array would be copied to empty it.
    mutating func recycle(_ array: consuming [Element]) {
        guard array.capacity > 0, array.capacity <= maxCapacity, arrays.count < maxArrays else { return }
        array.removeAll(keepingCapacity: true)
        // Counted after emptying: a shared array is emptied into a new buffer, whose capacity may differ.
        let bytes = Self.bytes(array.capacity)
        guard array.capacity <= maxCapacity, bytes <= maxBytes - keptBytes else { return }
        arrays.append(array)
        keptBytes += bytes
    }

    /// How many arrays are kept.
    var count: Int { arrays.count }

    private static func bytes(_ capacity: Int) -> Int { capacity * MemoryLayout<Element>.stride }
}
