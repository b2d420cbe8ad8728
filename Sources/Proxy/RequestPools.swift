import HTTP1
import Reactor

/// Storage one worker keeps between requests, so that a request in steady state takes arrays and buffers
/// its predecessors gave back instead of allocating them: every pool is bounded, and an idle connection holds
/// none of it. Used on one event-loop thread only (the worker's, or a test's rig).
///
///   takeX ──► a request's parser, stage or log uses it ──► recycleX (emptied) ──► the next request
final class RequestPools {
    /// Buffers for the connections' ByteBuffers and output queues (Reactor's `StoragePool`).
    let storage = StoragePool()
    /// Replay logs of requests on reused upstream connections: at most `replayBufferCount`, each of at most
    /// `replayLimit` bytes of capacity.
    private var replayBuffers: [[UInt8]] = []
    static let replayBufferCount = 8
    private let replayLimit: Int
    /// Arrays heads are serialized into and form stages encode part heads in: at most `scratchCount`, each of at
    /// most 64 KiB.
    private var scratch: [[UInt8]] = []
    static let scratchCount = 4
    static let scratchBytes = 64 * 1024
    /// Field arrays of finished heads, for the head parsers: at most `fieldStorageCount` arrays of at most
    /// `fieldStorageFields` fields (about 2 KiB each).
    private var fieldStorage: [[HTTPHeaderField]] = []
    static let fieldStorageCount = 64
    static let fieldStorageFields = 64

    /// Pools for requests whose replay logs hold at most `replayLimit` bytes (`pool.replay-limit`).
    init(replayLimit: Int) {
        self.replayLimit = replayLimit
    }

    func takeReplayBuffer() -> [UInt8] { replayBuffers.popLast() ?? [] }

    func recycleReplayBuffer(_ buffer: [UInt8]) {
        guard buffer.isEmpty, buffer.capacity <= replayLimit, replayBuffers.count < Self.replayBufferCount else {
            return
        }
        replayBuffers.append(buffer)
    }

    func takeScratch() -> [UInt8] { scratch.popLast() ?? [] }

    func recycleScratch(_ buffer: [UInt8]) {
        guard buffer.isEmpty, buffer.capacity > 0, buffer.capacity <= Self.scratchBytes,
              scratch.count < Self.scratchCount else { return }
        scratch.append(buffer)
    }

    func takeFieldStorage() -> [HTTPHeaderField] { fieldStorage.popLast() ?? [] }

    func recycleFieldStorage(_ storage: [HTTPHeaderField]) {
        guard storage.isEmpty, storage.capacity > 0, storage.capacity <= Self.fieldStorageFields,
              fieldStorage.count < Self.fieldStorageCount else { return }
        fieldStorage.append(storage)
    }
}
