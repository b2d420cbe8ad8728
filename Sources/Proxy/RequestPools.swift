import HTTP1
import Reactor

/// Storage one worker keeps between requests, so that a request in steady state takes arrays and buffers
/// its predecessors gave back instead of allocating them: every pool is bounded, and an idle connection holds
/// none of it. Used on one event-loop thread only (the worker's, or a test's rig).
///
///   take ──► a request's parser, stage or log uses it ──► recycle (emptied there) ──► the next request
final class RequestPools {
    /// Buffers for the connections' ByteBuffers and output queues (Reactor's `StoragePool`).
    let storage = StoragePool()
    /// Replay logs of requests on reused upstream connections: at most 8, each of at most `replayLimit` bytes.
    var replayLogs: ArrayPool<UInt8>
    /// Arrays heads are serialized into and form stages encode part heads in: at most 4 of at most 64 KiB.
    var scratch = ArrayPool<UInt8>(maxArrays: 4, maxCapacity: 64 * 1024)
    /// Field arrays of finished heads, for the head parsers: at most 64 arrays of at most 64 fields (2 KiB).
    var fieldStorage = ArrayPool<HTTPHeaderField>(maxArrays: 64, maxCapacity: 64)
    /// Part record lists of finished form stages: at most 16 lists of at most 16 records.
    var partRecords = ArrayPool<PartRecord>(maxArrays: 16, maxCapacity: 16)

    /// Pools for requests whose replay logs hold at most `replayLimit` bytes (`pool.replay-limit`).
    init(replayLimit: Int) {
        replayLogs = ArrayPool(maxArrays: 8, maxCapacity: replayLimit)
    }
}

/// Emptied arrays kept for reuse: at most `maxArrays`, each with room for at most `maxCapacity` elements
/// (larger ones go back to the allocator).
struct ArrayPool<Element> {
    let maxArrays: Int
    let maxCapacity: Int
    private var arrays: [[Element]] = []

    init(maxArrays: Int, maxCapacity: Int) {
        self.maxArrays = maxArrays
        self.maxCapacity = maxCapacity
    }

    /// An empty array, with the capacity of a recycled one when the pool holds one.
    mutating func take() -> [Element] { arrays.popLast() ?? [] }

    /// Empties `array`, keeping its capacity, and keeps it for a later `take`, within the bounds. Pass the last
    /// reference (`consume`, or a value just taken out of its owner): a shared array would be copied to empty it.
    mutating func recycle(_ array: consuming [Element]) {
        guard array.capacity > 0, array.capacity <= maxCapacity, arrays.count < maxArrays else { return }
        array.removeAll(keepingCapacity: true)
        arrays.append(array)
    }
}
