// One request's journey through the pool and a connection: the caller's continuation, and the stream
// state the loop builds the response in.

import Synchronization

/// A request in flight, from `ConnectionPool.send` until its caller is resumed (or from
/// `ConnectionPool.start` until its completion handler is called).
///
/// - Important: `finish` may be called from any thread and resumes the caller exactly once (which is
///   what makes the unchecked continuation safe: the state machine below is the check). The
///   `waiting` flag belongs to the pool (under its lock); the stream fields belong to the loop thread
///   of the connection the ticket was dispatched to.
final class HTTP2StreamTicket: @unchecked Sendable {
    private enum Completion {
        case idle
        case waiting(UnsafeContinuation<HTTP2Response, any Error>)
        case finishedEarly(Result<HTTP2Response, any Error>)
        case done
    }

    /// What is left to send. The fields go once nghttp2 has copied them (at submit), the body once its
    /// last byte is handed over: a request waiting for its answer (thousands of them over a long round
    /// trip) then holds neither. Loop-confined once dispatched.
    @exclusivity(unchecked) var request: HTTP2Request
    /// Called once with the result instead of resuming a continuation (`ConnectionPool.start`). Set at
    /// creation, so finishing needs no lock: the flag below makes it exactly once.
    private let onFinish: (@Sendable (Result<HTTP2Response, any Error>) -> Void)?
    /// MonotonicClock nanoseconds after which a request still waiting in the pool's queue gives up
    /// (`poolSaturated`: never sent).
    let deadline: UInt64
    /// The request timeout, for the error message.
    let timeoutNanoseconds: UInt64
    private let completion = Mutex(Completion.idle)
    private let finishedFlag = Atomic<Bool>(false)

    // Pool-confined (under the pool's lock). The fields below have one owner at a time (pool lock, then
    // loop thread), so `@exclusivity(unchecked)` spares them the runtime's dynamic exclusivity checks.
    @exclusivity(unchecked) var isWaiting = false
    @exclusivity(unchecked) var dispatchedTo: HTTP2Connection?

    // Loop-confined.
    @exclusivity(unchecked) var streamID: Int32 = 0
    @exclusivity(unchecked) var bodyOffset = 0
    @exclusivity(unchecked) var status = 0
    @exclusivity(unchecked) var responseHeaders = HTTP2HeaderFields()
    @exclusivity(unchecked) var responseBody: [UInt8] = []
    @exclusivity(unchecked) var headersSent = false
    /// When the stream times out: `timeoutNanoseconds` after it was opened on its connection. Time spent
    /// in the pool's queue before that is the worker's own congestion, not the server's silence, and a
    /// request dispatched with a few milliseconds of its queue deadline left would otherwise time out as
    /// if the server never answered (an attempt spent, and a fault counted against the pool).
    @exclusivity(unchecked) var streamDeadline: UInt64 = 0
    @exclusivity(unchecked) var endStreamReceived = false
    /// Set when the loop already resumed the caller (timeout, cancel, oversize) but the stream is
    /// still closing; the close callback then only releases the slot.
    @exclusivity(unchecked) var resolved = false

    init(
        request: HTTP2Request, deadline: UInt64, timeoutNanoseconds: UInt64,
        onFinish: (@Sendable (Result<HTTP2Response, any Error>) -> Void)? = nil
    ) {
        self.request = request
        self.deadline = deadline
        self.timeoutNanoseconds = timeoutNanoseconds
        self.onFinish = onFinish
    }

    /// True once the caller has been (or is about to be) resumed.
    var isFinished: Bool { finishedFlag.load(ordering: .acquiring) }

    /// Stores the caller's continuation; returns false when the ticket was finished before (the
    /// continuation has then been resumed already).
    func install(_ continuation: UnsafeContinuation<HTTP2Response, any Error>) -> Bool {
        precondition(onFinish == nil, "a stream ticket with a completion handler takes no continuation")
        let early = completion.withLock { state -> Result<HTTP2Response, any Error>? in
            switch state {
            case .idle:
                state = .waiting(continuation)
                return nil
            case .finishedEarly(let result):
                state = .done
                return result
            case .waiting, .done:
                preconditionFailure("a stream ticket's continuation was installed twice")
            }
        }
        guard let early else { return true }
        continuation.resume(with: early)
        return false
    }

    /// Resumes the caller with `result` unless it was resumed already. Safe from any thread.
    func finish(_ result: consuming Result<HTTP2Response, any Error>) {
        if let onFinish {
            guard !finishedFlag.exchange(true, ordering: .acquiringAndReleasing) else { return }
            onFinish(result)
            return
        }
        let continuation = completion.withLock { state -> UnsafeContinuation<HTTP2Response, any Error>? in
            switch state {
            case .idle:
                state = .finishedEarly(result)
                return nil
            case .waiting(let continuation):
                state = .done
                return continuation
            case .finishedEarly, .done:
                return nil
            }
        }
        finishedFlag.store(true, ordering: .releasing)
        continuation?.resume(with: result)
    }
}
