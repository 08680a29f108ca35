// When several parties race to finish one wait (a result against its deadline, a close against its
// timer), the first one resumes the continuation and the rest must not: resuming twice traps.

import Synchronization

/// A continuation that the first of several racing parties resumes; later resumes are ignored.
public final class ResumeOnce<Value: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<Value, Never>?>

    public init(_ continuation: CheckedContinuation<Value, Never>) {
        self.continuation = Mutex(continuation)
    }

    /// Resumes the continuation with `value` if nobody has yet; otherwise does nothing.
    public func resume(returning value: Value) {
        continuation.withLock { $0.take() }?.resume(returning: value)
    }
}
