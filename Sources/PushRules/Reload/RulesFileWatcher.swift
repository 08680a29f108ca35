// Polls a rules file and reloads its store when the file's content changes. Polling (rather than
// inotify) also sees Kubernetes ConfigMap updates, which swap a symlink instead of writing the file.

import Dispatch
import Synchronization

/// Every `interval`, asks the store to reload: the store reads the file and compares a hash of its
/// bytes (which, unlike modification time and size, also catches an edit within the same second
/// and a symlink swap), and compiles only when they changed. Rules files are small, so reading one
/// every few seconds costs next to nothing.
///
/// - Important: Runs on its own serial dispatch queue, never on Swift's cooperative pool.
///   `onReload` is called on that queue for every reload that replaced or rejected rules.
public final class RulesFileWatcher: Sendable {
    public let store: RulesStore
    public let interval: Duration
    private let onReload: @Sendable (RulesReloadResult) -> Void
    private let queue = DispatchQueue(label: "apns-worker.rules-watcher")
    private let timer = Mutex<(any DispatchSourceTimer)?>(nil)

    /// - Parameters:
    ///   - interval: time between checks; at least 100 ms. Default: 5 seconds.
    ///   - onReload: told about every replacement and every rejected version.
    public init(
        store: RulesStore, interval: Duration = .seconds(5),
        onReload: @escaping @Sendable (RulesReloadResult) -> Void
    ) {
        self.store = store
        self.interval = max(interval, .milliseconds(100))
        self.onReload = onReload
    }

    deinit { stop() }

    /// Starts polling. Calling it twice has no further effect.
    public func start() {
        timer.withLock { timer in
            guard timer == nil else { return }
            let source = DispatchSource.makeTimerSource(queue: queue)
            let nanoseconds =
                Int(interval.components.seconds) * 1_000_000_000
                + Int(interval.components.attoseconds / 1_000_000_000)
            source.schedule(
                deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds),
                leeway: .milliseconds(50))
            source.setEventHandler { [weak self] in self?.check() }
            source.resume()
            timer = source
        }
    }

    /// Stops polling; a check already running finishes first.
    public func stop() {
        let source = timer.withLock { timer -> (any DispatchSourceTimer)? in
            defer { timer = nil }
            return timer
        }
        source?.cancel()
    }

    /// One check, as the timer runs it. (A SIGHUP handler should call `store.reload()`, which also
    /// repeats the problems of a version already rejected.)
    public func check() {
        let result = store.reloadIfChanged()
        switch result {
        case .unchanged: break
        case .replaced, .rejected: onReload(result)
        }
    }
}
